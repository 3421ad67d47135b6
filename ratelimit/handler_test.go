package ratelimit_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	_ "github.com/sluicegw/sluice/caddyfile"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// caddyfile builds a Caddyfile: the test's global options (admin on
// adminPort) plus extra global lines, and one site per body. It returns the
// Caddyfile and the sites' URLs.
type setup struct {
	cfg       string
	urls      []string
	adminPort int
}

func caddyfile(t *testing.T, global string, sites ...string) setup {
	t.Helper()
	s := setup{adminPort: testcaddy.FreePort(t)}
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin localhost:%d\n\tpersist_config off\n\tstorage file_system %s\n%s\n}\n",
		s.adminPort, t.TempDir(), global)
	for _, body := range sites {
		port := testcaddy.FreePort(t)
		s.urls = append(s.urls, fmt.Sprintf("http://127.0.0.1:%d", port))
		fmt.Fprintf(&b, "http://127.0.0.1:%d {\n%s\n}\n", port, body)
	}
	s.cfg = b.String()
	return s
}

func status(t *testing.T, url string, headers ...string) int {
	t.Helper()
	resp, _ := testcaddy.Get(t, url, headers...)
	return resp.StatusCode
}

// expect sends requests and checks their statuses in order.
func expect(t *testing.T, url string, want []int, headers ...string) {
	t.Helper()
	for i, w := range want {
		if got := status(t, url, headers...); got != w {
			t.Fatalf("%s %v request %d: status %d, want %d (sequence %v)", url, headers, i+1, got, w, want)
		}
	}
}

func TestInlineTokenBucketBurstAndRejection(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 0.01
		burst 3
		key_resolver global
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	for i := 0; i < 3; i++ {
		resp, body := testcaddy.Get(t, s.urls[0])
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i+1, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(2-i) {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %d", i+1, got, 2-i)
		}
		if got := resp.Header.Get("X-RateLimit-Limit"); got != "3" {
			t.Errorf("X-RateLimit-Limit %q, want 3", got)
		}
	}
	resp, body := testcaddy.Get(t, s.urls[0])
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th request: %d, want 429", resp.StatusCode)
	}
	// One token at 0.01/s takes 100 s to refill.
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if ra < 90 || ra > 100 {
		t.Errorf("Retry-After %q, want about 100", resp.Header.Get("Retry-After"))
	}
	if !strings.HasPrefix(body, `{"error":"rate_limited","rule":"inline:`) || !strings.HasSuffix(body, fmt.Sprintf(`"retry_after":%d}`, ra)) {
		t.Errorf("body %q", body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	pol := resp.Header.Get("RateLimit-Policy")
	if !strings.HasPrefix(pol, `"inline:`) || !strings.HasSuffix(pol, `";q=3;w=300`) {
		t.Errorf("RateLimit-Policy %q", pol)
	}
	if rl := resp.Header.Get("RateLimit"); !strings.Contains(rl, ";r=0;t=") {
		t.Errorf("RateLimit %q", rl)
	}
}

func TestSlidingWindowInCaddy(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		limit_type SLIDING_WINDOW
		qps 0.1
		window_size 60
		key_resolver global
		headers off
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 200, 200, 200, 200, 200, 429})
	resp, _ := testcaddy.Get(t, s.urls[0])
	if resp.Header.Get("X-RateLimit-Limit") != "" || resp.Header.Get("RateLimit") != "" {
		t.Errorf("headers off, got %v", resp.Header)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on a rejection")
	}
}

// Two routes bound to one rule share its quota; another rule is separate;
// `ratelimit <id>`, `rule <id>` and `route <name>` all reach the same rule.
func TestRoutesBoundToOneRuleShareOneQuota(t *testing.T) {
	s := caddyfile(t, `
	rulestore {
		rate_limit svc {
			qps 0.01
			burst 4
			key_resolver global
		}
		rate_limit other {
			qps 0.01
			burst 1
			key_resolver global
		}
		binding orders {
			rate_limit svc
		}
		binding invoices {
			rate_limit svc
		}
	}`,
		"ratelimit { \n route orders \n }\n respond \"ok\"",
		"ratelimit { \n route invoices \n }\n respond \"ok\"",
		"ratelimit svc\n respond \"ok\"",
		"ratelimit {\n rule other\n }\n respond \"ok\"")
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 200})
	expect(t, s.urls[1], []int{200, 200})
	expect(t, s.urls[2], []int{429}) // 4 used across the two routes
	expect(t, s.urls[0], []int{429})
	expect(t, s.urls[3], []int{200, 429}) // its own quota
}

func TestPerKeyOverrides(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 0.01
		burst 2
		key_resolver userId
		overrides "user:vip=0.01/5, user:tiny=0.01/1"
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 200, 200, 200, 200, 429}, "X-User-Id: vip")
	expect(t, s.urls[0], []int{200, 200, 429}, "X-User-Id: bob")
	expect(t, s.urls[0], []int{200, 429}, "X-User-Id: tiny")
	resp, _ := testcaddy.Get(t, s.urls[0], "X-User-Id: vip")
	if got := resp.Header.Get("X-RateLimit-Limit"); got != "5" {
		t.Errorf("vip X-RateLimit-Limit %q, want 5", got)
	}
}

// userId falls back to the client IP, and a user id that looks like an IP
// never shares the IP's bucket.
func TestKeyFallbackNeverCollides(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 0.01
		burst 1
		key_resolver userId
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 429}, "X-User-Id: 127.0.0.1")
	expect(t, s.urls[0], []int{200, 429}) // ip:127.0.0.1, its own bucket
	expect(t, s.urls[0], []int{200}, "X-User-Id: alice")
}

func TestCompositeKey(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 0.01
		burst 1
		key_resolver {http.request.header.X-Tenant-Id}:{http.request.uri.path}
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0]+"/a", []int{200, 429}, "X-Tenant-Id: acme")
	expect(t, s.urls[0]+"/b", []int{200, 429}, "X-Tenant-Id: acme")
	expect(t, s.urls[0]+"/a", []int{200}, "X-Tenant-Id: globex")
	// No tenant: the default empty-key policy denies with 403.
	resp, body := testcaddy.Get(t, s.urls[0]+"/a")
	if resp.StatusCode != 403 || !strings.Contains(body, `"error":"empty_key"`) {
		t.Fatalf("no tenant: %d %q, want 403 empty_key", resp.StatusCode, body)
	}
}

func TestEmptyKeyPolicies(t *testing.T) {
	site := func(policy string) string {
		return fmt.Sprintf(`
	ratelimit {
		qps 0.01
		burst 1
		key_resolver {http.request.header.X-Api-Key}
		%s
	}
	respond "ok"`, policy)
	}
	s := caddyfile(t, "", site(""), site("on_empty_key deny 401"), site("on_empty_key anonymous"), site("on_empty_key ip"),
		site("on_empty_key deny 401\n\t\tshadow true"))
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{403, 403})
	expect(t, s.urls[1], []int{401})
	// One named bucket for every key-less request: drained, not bypassed.
	expect(t, s.urls[2], []int{200, 429})
	expect(t, s.urls[2], []int{200}, "X-Api-Key: k1")
	expect(t, s.urls[3], []int{200, 429})
	expect(t, s.urls[4], []int{200, 200}) // shadow: counted, never refused
}

func TestSpoofedForwardedForIgnoredUnlessTrusted(t *testing.T) {
	site := `
	ratelimit {
		qps 0.01
		burst 1
		key_resolver ip
	}
	respond "ok"`
	s := caddyfile(t, "", site)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200}, "X-Forwarded-For: 1.1.1.1")
	// An untrusted peer's X-Forwarded-For does not make a new client.
	expect(t, s.urls[0], []int{429}, "X-Forwarded-For: 2.2.2.2")
}

func TestForwardedForFromTrustedProxy(t *testing.T) {
	site := `
	ratelimit {
		qps 0.01
		burst 1
		key_resolver ip
	}
	respond "{client_ip}"`
	s := caddyfile(t, "\tservers {\n\t\ttrusted_proxies static 127.0.0.1/8\n\t}", site)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 429}, "X-Forwarded-For: 1.1.1.1")
	expect(t, s.urls[0], []int{200, 429}, "X-Forwarded-For: 2.2.2.2")
}
