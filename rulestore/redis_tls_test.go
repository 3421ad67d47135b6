package rulestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore/redisconf"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// tlsGateway is a Caddyfile whose store reaches Redis over TLS with the
// given tls block, serving a static 1000 qps rule that Redis may override.
func tlsGateway(redis, tlsBlock string, site int) string {
	return fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis {
			%s
			tls {
%s
			}
		}
		rate_limit order_api {
			qps          1000
			key_resolver global
		}
	}
}
http://127.0.0.1:%d {
	ratelimit order_api
	respond "ok"
}`, redis, tlsBlock, site)
}

// TestRulesOverTLSWithClientAuth runs the built Caddy against a redis-server
// that listens on TLS only and requires client certificates: with the test
// CA and the client certificate configured, a rule pushed to Redis reaches
// Caddy, through a rediss:// URL and through addrs plus server_name alike.
func TestRulesOverTLSWithClientAuth(t *testing.T) {
	pki := redistest.NewPKI(t)
	r := redistest.StartTLS(t, pki)
	block := fmt.Sprintf("\t\t\t\tca %s\n\t\t\t\tclient_auth %s %s", pki.CAFile, pki.ClientCert, pki.ClientKey)
	for _, c := range []struct{ name, redis, block string }{
		{"rediss url", "url rediss://" + r.Addr, block},
		// The certificate names redis.test, not the address dialled.
		{"addrs and server_name", "addrs " + r.Addr, block + "\n\t\t\t\tserver_name redis.test"},
	} {
		t.Run(c.name, func(t *testing.T) {
			site := testcaddy.FreePort(t)
			p := testcaddy.Start(t, tlsGateway(c.redis, c.block, site))
			url := fmt.Sprintf("http://127.0.0.1:%d/", site)
			rc := r.Client()
			redistest.Push(t, rc, "rate_limit:rule:order_api", "gateway:rules:rate_limit", "order_api",
				"qps", "0.001", "burst", "2", "key_resolver", "global")
			// 20s: the store connects, loads and applies the pushed rule in
			// well under a second; the margin is for a busy 2-core machine.
			testcaddy.Eventually(t, 20*time.Second, "the rule pushed over TLS rejects", func() bool {
				resp, _ := testcaddy.Get(t, url)
				return resp.StatusCode == http.StatusTooManyRequests
			})
			if strings.Contains(p.Logs(), "redis unavailable") {
				t.Fatalf("the store lost Redis on the way:\n%s", p.Logs())
			}
			rc.Del(context.Background(), "rate_limit:rule:order_api")
			p.Stop()
		})
	}
}

// TestTLSWrongCAFailsClearly configures a CA that did not sign Redis's
// certificate: Caddy starts, serves its static rule, and logs why Redis is
// unavailable in words an operator can act on.
func TestTLSWrongCAFailsClearly(t *testing.T) {
	pki, other := redistest.NewPKI(t), redistest.NewPKI(t)
	r := redistest.StartTLS(t, pki)
	site := testcaddy.FreePort(t)
	block := fmt.Sprintf("\t\t\t\tca %s\n\t\t\t\tclient_auth %s %s", other.CAFile, pki.ClientCert, pki.ClientKey)
	p := testcaddy.Start(t, tlsGateway("url rediss://"+r.Addr, block, site))
	testcaddy.Eventually(t, 20*time.Second, "the store logs the certificate error", func() bool {
		logs := p.Logs()
		return strings.Contains(logs, "redis unavailable") && strings.Contains(logs, "certificate signed by unknown authority")
	})
	if got := admitted(t, fmt.Sprintf("http://127.0.0.1:%d/", site), 5); got != 5 {
		t.Fatalf("static rule (1000 qps) without Redis: %d of 5 admitted", got)
	}
}

// TestRedisSettingsRejected: bad TLS files and pool sizes fail at
// provisioning (so `caddy validate`) with an error naming the field.
func TestRedisSettingsRejected(t *testing.T) {
	pki := redistest.NewPKI(t)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	for _, c := range []struct {
		name string
		cfg  redisconf.Config
		want string
	}{
		{"unreadable ca", redisconf.Config{URL: "rediss://127.0.0.1:1", TLS: &redisconf.TLS{CAFiles: []string{missing}}}, "redis tls ca_files: open " + missing},
		{"ca not pem", redisconf.Config{URL: "127.0.0.1:1", TLS: &redisconf.TLS{CAFiles: []string{pki.ServerKey}}}, "redis tls ca_files: " + pki.ServerKey + " holds no PEM certificate"},
		{"cert without key", redisconf.Config{URL: "127.0.0.1:1", TLS: &redisconf.TLS{ClientCertificateFile: pki.ClientCert}}, "redis tls client_certificate_file: needs client_certificate_key_file"},
		{"key without cert", redisconf.Config{URL: "127.0.0.1:1", TLS: &redisconf.TLS{ClientCertificateKeyFile: pki.ClientKey}}, "redis tls client_certificate_key_file: needs client_certificate_file"},
		{"key of another cert", redisconf.Config{URL: "127.0.0.1:1", TLS: &redisconf.TLS{ClientCertificateFile: pki.ClientCert, ClientCertificateKeyFile: pki.ServerKey}}, "redis tls client_certificate_file/client_certificate_key_file: "},
		{"negative pool", redisconf.Config{URL: "127.0.0.1:1", PoolSize: -1}, "redis pool_size: want a number > 0"},
		{"huge pool", redisconf.Config{URL: "127.0.0.1:1", PoolSize: 1_000_000}, "redis pool_size: want a number > 0 and at most 10000, got 1000000"},
		{"negative timeout", redisconf.Config{URL: "127.0.0.1:1", ReadTimeout: syntax.Duration(-time.Second)}, "redis read_timeout: want a duration above 0 and at most 1m0s, got -1s"},
		{"huge timeout", redisconf.Config{URL: "127.0.0.1:1", DialTimeout: syntax.Duration(time.Hour)}, "redis dial_timeout: want a duration above 0 and at most 1m0s, got 1h0m0s"},
		{"sentinel password without master", redisconf.Config{URL: "127.0.0.1:1", SentinelPassword: "x"}, "redis sentinel_username/sentinel_password: need master_name"},
	} {
		_, err := c.cfg.Options()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}

	// The same through `caddy validate` of the built binary.
	caddyfile := func(redis, more string) string {
		return fmt.Sprintf("{\n\trulestore {\n\t\tredis {\n%s\n\t\t}\n%s\t}\n}\n", redis, more)
	}
	for _, c := range []struct{ redis, more, want string }{
		{"\t\t\turl rediss://127.0.0.1:1\n\t\t\ttls {\n\t\t\t\tca " + missing + "\n\t\t\t}", "", "redis tls ca_files: open " + missing},
		{"\t\t\turl 127.0.0.1:1\n\t\t\tpool_size 0", "", `redis pool_size: want a number > 0, got \"0\", at `}, // the log is JSON
		{"\t\t\turl 127.0.0.1:1\n\t\t\twrite_timeout 2m", "", `redis write_timeout: want a duration above 0 and at most 1m0s, got 2m0s`},
		{"\t\t\turl 127.0.0.1:1\n\t\t\ttls {\n\t\t\t\tclient_auth " + pki.ClientCert + "\n\t\t\t}", "", "redis tls client_auth: want <cert_file> <key_file>, at "},
		{"\t\t\turl 127.0.0.1:1\n\t\t\ttls {\n\t\t\t\tcafile x\n\t\t\t}", "", "cafile"},
		{"\t\t\turl 127.0.0.1:1", "\t\tresync 10ms\n", `rulestore resync: want a duration from 1s to 8784h0m0s, got 10ms`},
	} {
		path := filepath.Join(t.TempDir(), "Caddyfile")
		if err := os.WriteFile(path, []byte(caddyfile(c.redis, c.more)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(testcaddy.Binary(t), "validate", "--config", path, "--adapter", "caddyfile").CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%q: got %v\n%s\nwant a failure containing %q", c.redis, err, out, c.want)
		}
	}
}

// TestTLSMisspelledJSONSettingRejected: the tls block is decoded as
// strictly as the rest of a JSON config, so a typo fails instead of being
// ignored (found by the docs snippet check: a misspelled ca_files passed).
func TestTLSMisspelledJSONSettingRejected(t *testing.T) {
	var cfg redisconf.Config
	err := caddy.StrictUnmarshalJSON([]byte(`{"url":"rediss://127.0.0.1:1","tls":{"ca_file":["/etc/ca.pem"]}}`), &cfg)
	if err == nil || !strings.Contains(err.Error(), `unknown field "ca_file"`) {
		t.Fatalf("want an error naming ca_file, got %v", err)
	}
}

// TestTLSTrueStillAccepted: `"tls": true`, the older JSON form, still turns
// TLS on with the system's CAs.
func TestTLSTrueStillAccepted(t *testing.T) {
	var cfg redisconf.Config
	if err := json.Unmarshal([]byte(`{"addrs":["127.0.0.1:1"],"tls":true,"pool_size":7}`), &cfg); err != nil {
		t.Fatal(err)
	}
	o, err := cfg.Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.TLSConfig == nil || o.TLSConfig.RootCAs != nil || o.PoolSize != 7 {
		t.Fatalf("tls true: TLSConfig %+v, pool %d", o.TLSConfig, o.PoolSize)
	}
}
