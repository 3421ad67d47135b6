package rulestore

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// RedisConfig says how to reach Redis: standalone, Sentinel or Cluster.
type RedisConfig struct {
	// URL is redis://[user:password@]host:port[/db], or rediss:// for TLS.
	URL string `json:"url,omitempty"`
	// Addrs lists several nodes: Cluster seeds, or Sentinels with MasterName.
	Addrs      []string `json:"addrs,omitempty"`
	MasterName string   `json:"master_name,omitempty"`
	Cluster    bool     `json:"cluster,omitempty"`
	Username   string   `json:"username,omitempty"`
	Password   string   `json:"password,omitempty"`
	DB         int      `json:"db,omitempty"`
	TLS        bool     `json:"tls,omitempty"`
	// Timeouts; defaults 1s each, so a dead or hung Redis is noticed fast.
	DialTimeout  caddy.Duration `json:"dial_timeout,omitempty"`
	ReadTimeout  caddy.Duration `json:"read_timeout,omitempty"`
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty"`
}

// sources shares one Redis source per connection settings across config
// generations, so a reload keeps the subscription and loses no update.
var sources = caddy.NewUsagePool()

type redisSource struct {
	snap   atomic.Pointer[layer]
	logger *zap.Logger
	once   sync.Once
}

func acquireSource(cfg *RedisConfig, prefix string, resync time.Duration, logger *zap.Logger) (*redisSource, string, error) {
	b, _ := json.Marshal(struct {
		R      *RedisConfig
		P      string
		Resync time.Duration
	}{cfg, prefix, resync})
	key := string(b)
	v, _, err := sources.LoadOrNew(key, func() (caddy.Destructor, error) {
		s := &redisSource{logger: logger}
		s.snap.Store(new(layer))
		return s, nil
	})
	if err != nil {
		return nil, "", err
	}
	return v.(*redisSource), key, nil
}

func (s *redisSource) snapshot() *layer { return s.snap.Load() }
func (s *redisSource) start()           {}
func (s *redisSource) Destruct() error  { return nil }
