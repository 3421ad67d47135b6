package rulestore

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
)

// RedisConfig says how to reach Redis: standalone, Sentinel or Cluster.
type RedisConfig struct {
	// URL is redis://[user:password@]host:port[/db], or rediss:// for TLS.
	URL string `json:"url,omitempty"`
	// Addrs lists several nodes: Cluster seeds, or Sentinels with MasterName.
	Addrs []string `json:"addrs,omitempty"`
	// MasterName selects Sentinel mode: Addrs are then the Sentinels.
	MasterName string `json:"master_name,omitempty"`
	// Cluster forces Redis Cluster mode even with a single seed address.
	Cluster  bool   `json:"cluster,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	DB       int    `json:"db,omitempty"`
	TLS      bool   `json:"tls,omitempty"`
	// Timeouts; 1s each by default, so a dead or hung Redis is noticed fast
	// and never holds a request or a reload for long.
	DialTimeout  caddy.Duration `json:"dial_timeout,omitempty"`
	ReadTimeout  caddy.Duration `json:"read_timeout,omitempty"`
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty"`
}

const defaultRedisTimeout = time.Second

// Options turns the config into go-redis options for a universal client.
// Placeholders such as {env.REDIS_PASSWORD} are expanded.
func (c *RedisConfig) Options() (*redis.UniversalOptions, error) {
	repl := caddy.NewReplacer()
	o := &redis.UniversalOptions{
		MasterName:            repl.ReplaceAll(c.MasterName, ""),
		IsClusterMode:         c.Cluster,
		Username:              repl.ReplaceAll(c.Username, ""),
		Password:              repl.ReplaceAll(c.Password, ""),
		DB:                    c.DB,
		DialTimeout:           orDefault(c.DialTimeout),
		ReadTimeout:           orDefault(c.ReadTimeout),
		WriteTimeout:          orDefault(c.WriteTimeout),
		ContextTimeoutEnabled: true, // else go-redis ignores context deadlines
		MaxRetries:            1,
		DisableIdentity:       true,
	}
	for _, a := range c.Addrs {
		o.Addrs = append(o.Addrs, repl.ReplaceAll(a, ""))
	}
	if u := repl.ReplaceAll(c.URL, ""); u != "" {
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		parsed, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("redis url: %v", err)
		}
		o.Addrs = append([]string{parsed.Addr}, o.Addrs...)
		if o.Username == "" {
			o.Username = parsed.Username
		}
		if o.Password == "" {
			o.Password = parsed.Password
		}
		if o.DB == 0 {
			o.DB = parsed.DB
		}
		o.TLSConfig = parsed.TLSConfig
	}
	if len(o.Addrs) == 0 {
		return nil, fmt.Errorf("redis: no url or addrs")
	}
	if c.TLS && o.TLSConfig == nil {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if o.DB != 0 && (c.Cluster || len(o.Addrs) > 1 && o.MasterName == "") {
		return nil, fmt.Errorf("redis: db %d is not available in cluster mode", o.DB)
	}
	return o, nil
}

func orDefault(d caddy.Duration) time.Duration {
	if d <= 0 {
		return defaultRedisTimeout
	}
	return time.Duration(d)
}
