package faults_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestRedisTLSAndACL runs the built Caddy against a TLS-only port of
// redis-server (certificate from a CA the test makes, trusted through
// SSL_CERT_FILE), logging in as an ACL user whose password comes from an
// environment placeholder, with the default user disabled. Rules pushed by
// an operator reach Caddy; Caddy's connections are TLS and that user; a
// wrong password leaves Caddy serving its rules, and never appears in the
// log. The admin endpoints answer on the admin API only, not on a site.
func TestRedisTLSAndACL(t *testing.T) {
	pki := redistest.NewPKI(t)
	caFile, certFile, keyFile := pki.CAFile, pki.ServerCert, pki.ServerKey
	tlsPort := testcaddy.FreePort(t)
	r := redistest.Start(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", certFile,
		"--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	ctx := context.Background()
	boot := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer boot.Close()
	for _, cmd := range [][]any{
		{"ACL", "SETUSER", "operator", "on", ">operator-pw", "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "sluice", "on", ">s3cret-Pa55", "~*", "&*", "+@all", "-@dangerous", "+client|list"},
		{"ACL", "SETUSER", "default", "off"},
	} {
		if err := boot.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	op := redis.NewClient(&redis.Options{Addr: r.Addr, Username: "operator", Password: "operator-pw", ClientName: "faults-test"})
	defer op.Close()
	if err := op.Ping(ctx).Err(); err != nil {
		t.Fatalf("operator login: %v", err)
	}
	anon := redis.NewClient(&redis.Options{Addr: r.Addr})
	if err := anon.Ping(ctx).Err(); err == nil {
		t.Fatalf("the default user still works")
	}
	anon.Close()

	t.Setenv("SSL_CERT_FILE", caFile) // the subprocess trusts the test CA
	t.Setenv("SLUICE_FAULTS_REDIS_PASSWORD", "s3cret-Pa55")
	site := testcaddy.FreePort(t)
	caddyfile := func(password string) string {
		return fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis {
			url      rediss://127.0.0.1:%d
			username sluice
			password %s
		}
		rate_limit tls_rule {
			qps          100
			key_resolver userId
		}
	}
}
http://127.0.0.1:%d {
	ratelimit tls_rule
	respond "ok"
}
`, tlsPort, password, site)
	}
	p := testcaddy.Start(t, caddyfile("{env.SLUICE_FAULTS_REDIS_PASSWORD}"))
	testcaddy.Eventually(t, 15*time.Second, "store connected over TLS as user sluice", func() bool {
		return adminStore(t, p.AdminPort).Connected
	})
	push(t, op, "rate_limit", "tls_rule", "qps", "0.001", "burst", "2", "key_resolver", "userId")
	waitRule(t, p.AdminPort, "rate_limit", "tls_rule", map[string]string{"burst": "2"})
	wantStatuses(t, "rule pushed over TLS", statuses(t, 3, fmt.Sprintf("http://127.0.0.1:%d/", site)), 200, 200, 429)
	list, _ := op.ClientList(ctx).Result()
	caddyConns := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, "name=faults-test") || strings.Contains(line, "user=default") {
			continue
		}
		caddyConns++
		if !strings.Contains(line, "user=sluice") || !strings.Contains(line, fmt.Sprintf("laddr=127.0.0.1:%d", tlsPort)) {
			t.Errorf("a Caddy connection not on the TLS port as user sluice: %s", line)
		}
	}
	if caddyConns == 0 {
		t.Errorf("no Caddy connection in CLIENT LIST:\n%s", list)
	}

	// The admin endpoints are not served on a site.
	resp, body := testcaddy.Get(t, fmt.Sprintf("http://127.0.0.1:%d/sluice/store", site))
	if strings.Contains(body, `"connected"`) {
		t.Errorf("/sluice/store answered on a site: %d %s", resp.StatusCode, body)
	}

	// A wrong password: Caddy keeps its rules and serves; the password is
	// not logged.
	if err := p.Reload(caddyfile("Wr0ng-Pa55")); err != nil {
		t.Fatal(err)
	}
	testcaddy.Eventually(t, 15*time.Second, "store not connected with a wrong password", func() bool {
		return !adminStore(t, p.AdminPort).Connected
	})
	wantStatuses(t, "serving with a wrong Redis password", statuses(t, 1, fmt.Sprintf("http://127.0.0.1:%d/", site), "X-User-Id: new"), 200)
	for _, secret := range []string{"s3cret-Pa55", "Wr0ng-Pa55"} {
		if strings.Contains(p.Logs(), secret) {
			t.Errorf("the Redis password %q appears in Caddy's log", secret)
		}
	}
}
