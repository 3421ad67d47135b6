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

// config builds a Caddyfile: the global options (plus extra global lines)
// and one site per body, each answering "ok" after its directives.
func config(t *testing.T, global string, sites ...string) (string, []string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\t%s\n%s\n}\n", testcaddy.Options(t), global)
	var urls []string
	for _, s := range sites {
		port := testcaddy.FreePort(t)
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", port))
		fmt.Fprintf(&b, "http://127.0.0.1:%d {\n%s\n\trespond \"ok\"\n}\n", port, s)
	}
	return b.String(), urls
}

func status(t *testing.T, url string, headers ...string) int {
	t.Helper()
	resp, _ := testcaddy.Get(t, url, headers...)
	return resp.StatusCode
}

func TestInlineTokenBucketBurstAndRejection(t *testing.T) {
	cfg, urls := config(t, "", `
	ratelimit {
		qps 0.01
		burst 3
		key_resolver global
	}`)
	testcaddy.Run(t, cfg)
	for i := 0; i < 3; i++ {
		resp, body := testcaddy.Get(t, urls[0])
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
	resp, body := testcaddy.Get(t, urls[0])
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
