package redisconf

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// Config says how to reach Redis: standalone, Sentinel or Cluster.
type Config struct {
	// URL is redis://[user:password@]host:port[/db], or rediss:// for TLS.
	URL string `json:"url,omitempty"`
	// Addrs lists several nodes: Cluster seeds, or Sentinels with MasterName.
	Addrs []string `json:"addrs,omitempty"`
	// MasterName selects Sentinel mode: Addrs (and URL's address) are then
	// the Sentinels, which tell the store where the master named so is.
	MasterName string `json:"master_name,omitempty"`
	// SentinelUsername is the ACL user that authenticates to the Sentinels
	// themselves (Username is for the master). Placeholders are expanded.
	SentinelUsername string `json:"sentinel_username,omitempty"`
	// SentinelPassword authenticates to the Sentinels (Sentinel's own
	// `requirepass`, or SentinelUsername's password); Password is for the
	// master. Placeholders are expanded.
	SentinelPassword string `json:"sentinel_password,omitempty"`
	// Cluster forces Redis Cluster mode even with a single seed address.
	Cluster bool `json:"cluster,omitempty"`
	// Username is the ACL user that logs in to Redis, with Password.
	// Placeholders are expanded.
	Username string `json:"username,omitempty"`
	// Password logs in to Redis: `requirepass` alone, or Username's
	// password. Placeholders such as {env.REDIS_PASSWORD} are expanded.
	Password string `json:"password,omitempty"`
	// DB selects a database (standalone and Sentinel only).
	DB int `json:"db,omitempty"`
	// TLS connects over TLS. `{}` (or `true`) uses the system's trusted
	// CAs and the address's host as server name; a rediss:// URL implies it.
	TLS *TLS `json:"tls,omitempty"`
	// PoolSize is the most connections kept per Redis node (go-redis's
	// default, 10 per CPU, when omitted). The store's own session uses a
	// few; the rest serve handlers that keep state in Redis (cluster
	// rate limits). At most MaxPoolSize.
	PoolSize int `json:"pool_size,omitempty"`
	// DialTimeout bounds connecting to Redis; 1s by default, so a dead
	// Redis is noticed fast and never holds a request or a reload for
	// long. At most MaxTimeout.
	DialTimeout syntax.Duration `json:"dial_timeout,omitempty"`
	// ReadTimeout bounds waiting for a reply; 1s by default, so a hung
	// Redis is noticed fast. At most MaxTimeout.
	ReadTimeout syntax.Duration `json:"read_timeout,omitempty"`
	// WriteTimeout bounds sending a command; 1s by default. At most
	// MaxTimeout.
	WriteTimeout syntax.Duration `json:"write_timeout,omitempty"`
}

// TLS is how the store speaks TLS to Redis (and to Sentinels), shaped
// like the TLS settings of Caddy's reverse-proxy transport. File names may
// use placeholders. Files are read when the config is provisioned, so a bad
// file fails `caddy validate` and a reload picks up rotated files.
type TLS struct {
	// CAFiles are PEM files of the CAs that Redis's certificate must chain
	// to. When set, only these are trusted; else the system's CAs are.
	CAFiles []string `json:"ca_files,omitempty"`
	// ClientCertificateFile is a PEM certificate presented to Redis, for a
	// server started with `tls-auth-clients yes`; with its key in
	// ClientCertificateKeyFile (both or neither).
	ClientCertificateFile string `json:"client_certificate_file,omitempty"`
	// ClientCertificateKeyFile is the PEM key of ClientCertificateFile.
	ClientCertificateKeyFile string `json:"client_certificate_key_file,omitempty"`
	// ServerName is the name Redis's certificate must carry, when it is not
	// the host of the address dialled (e.g. Redis reached by IP, or masters
	// found through Sentinel).
	ServerName string `json:"server_name,omitempty"`
	// InsecureSkipVerify accepts any server certificate. For tests only:
	// it gives up the protection TLS is there for.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// UnmarshalJSON also accepts `true`, the older form of `"tls": {}`.
func (t *TLS) UnmarshalJSON(b []byte) error {
	switch strings.TrimSpace(string(b)) {
	case "true":
		*t = TLS{}
		return nil
	case "false":
		return fmt.Errorf("redis tls: false is not a setting: leave tls out for plain TCP")
	}
	// Strict, as Caddy decodes the rest of the config: a custom
	// UnmarshalJSON would otherwise let a misspelled setting (ca_file for
	// ca_files) pass silently.
	type plain TLS
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode((*plain)(t)); err != nil {
		return fmt.Errorf("redis tls: %w", err)
	}
	return nil
}

const defaultRedisTimeout = time.Second

// Bounds of the Redis settings. A negative timeout would mean "wait
// forever" to go-redis, stalling requests on a hung Redis; more than a
// minute, or thousands of connections per node, is a typo.
const (
	MaxTimeout  = time.Minute
	MaxPoolSize = 10000
)

// Options turns the config into go-redis options for a universal client.
// Placeholders such as {env.REDIS_PASSWORD} are expanded. A bad value fails
// with an error naming its field.
func (c *Config) Options() (*redis.UniversalOptions, error) {
	o, _, err := c.OptionsDigest()
	return o, err
}

// OptionsDigest is Options plus a digest of the TLS files read, so a
// reload after a certificate rotation gets a new client even if the paths
// are the same.
func (c *Config) OptionsDigest() (*redis.UniversalOptions, string, error) {
	repl := caddy.NewReplacer()
	if c.PoolSize < 0 || c.PoolSize > MaxPoolSize {
		return nil, "", fmt.Errorf("redis pool_size: want a number > 0 and at most %d, got %d", MaxPoolSize, c.PoolSize)
	}
	for _, t := range []struct {
		name string
		d    syntax.Duration
	}{{"dial_timeout", c.DialTimeout}, {"read_timeout", c.ReadTimeout}, {"write_timeout", c.WriteTimeout}} {
		if t.d < 0 || time.Duration(t.d) > MaxTimeout {
			return nil, "", fmt.Errorf("redis %s: want a duration above 0 and at most %s, got %s", t.name, MaxTimeout, time.Duration(t.d))
		}
	}
	o := &redis.UniversalOptions{
		MasterName:            repl.ReplaceAll(c.MasterName, ""),
		SentinelUsername:      repl.ReplaceAll(c.SentinelUsername, ""),
		SentinelPassword:      repl.ReplaceAll(c.SentinelPassword, ""),
		IsClusterMode:         c.Cluster,
		Username:              repl.ReplaceAll(c.Username, ""),
		Password:              repl.ReplaceAll(c.Password, ""),
		DB:                    c.DB,
		PoolSize:              c.PoolSize,
		DialTimeout:           orDefault(c.DialTimeout),
		ReadTimeout:           orDefault(c.ReadTimeout),
		WriteTimeout:          orDefault(c.WriteTimeout),
		ContextTimeoutEnabled: true, // else go-redis ignores context deadlines
		MaxRetries:            1,
		DisableIdentity:       true,
	}
	if (o.SentinelUsername != "" || o.SentinelPassword != "") && o.MasterName == "" {
		return nil, "", fmt.Errorf("redis sentinel_username/sentinel_password: need master_name (Sentinel mode)")
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
			return nil, "", fmt.Errorf("redis url: %v", err)
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
		return nil, "", fmt.Errorf("redis: no url or addrs")
	}
	var digest string
	if c.TLS != nil {
		cfg, d, err := c.TLS.config(repl)
		if err != nil {
			return nil, "", err
		}
		if cfg.ServerName == "" && o.TLSConfig != nil {
			cfg.ServerName = o.TLSConfig.ServerName // the rediss:// URL's host
		}
		o.TLSConfig, digest = cfg, d
	}
	if o.DB != 0 && (c.Cluster || len(o.Addrs) > 1 && o.MasterName == "") {
		return nil, "", fmt.Errorf("redis: db %d is not available in cluster mode", o.DB)
	}
	return o, digest, nil
}

// config builds the client TLS config, reading the files it names; the
// digest covers their contents.
func (t *TLS) config(repl *caddy.Replacer) (*tls.Config, string, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         repl.ReplaceAll(t.ServerName, ""),
		InsecureSkipVerify: t.InsecureSkipVerify,
	}
	h := sha256.New()
	read := func(field, name string) ([]byte, error) {
		b, err := os.ReadFile(repl.ReplaceAll(name, ""))
		if err != nil {
			return nil, fmt.Errorf("redis tls %s: %v", field, err)
		}
		h.Write(b)
		return b, nil
	}
	if len(t.CAFiles) > 0 {
		cfg.RootCAs = x509.NewCertPool()
		for _, name := range t.CAFiles {
			pem, err := read("ca_files", name)
			if err != nil {
				return nil, "", err
			}
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, "", fmt.Errorf("redis tls ca_files: %s holds no PEM certificate", name)
			}
		}
	}
	certFile, keyFile := t.ClientCertificateFile, t.ClientCertificateKeyFile
	switch {
	case certFile != "" && keyFile == "":
		return nil, "", fmt.Errorf("redis tls client_certificate_file: needs client_certificate_key_file too")
	case certFile == "" && keyFile != "":
		return nil, "", fmt.Errorf("redis tls client_certificate_key_file: needs client_certificate_file too")
	case certFile != "":
		certPEM, err := read("client_certificate_file", certFile)
		if err != nil {
			return nil, "", err
		}
		keyPEM, err := read("client_certificate_key_file", keyFile)
		if err != nil {
			return nil, "", err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, "", fmt.Errorf("redis tls client_certificate_file/client_certificate_key_file: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, hex.EncodeToString(h.Sum(nil)), nil
}

func orDefault(d syntax.Duration) time.Duration {
	if d <= 0 {
		return defaultRedisTimeout
	}
	return time.Duration(d)
}
