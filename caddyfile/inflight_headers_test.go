package caddyfile_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// Finding 7 of issue 13: a max_concurrent refusal carried
// X-RateLimit-Remaining: 0 and RateLimit: ...;r=0 although the rate quota
// was untouched. It now carries no quota headers (docs/ratelimit.md).
func TestInFlightRefusalCarriesNoQuotaHeaders(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	defer upstream.Close()
	port := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
}
http://127.0.0.1:%d {
	ratelimit {
		qps            100
		burst          100
		key_resolver   global
		max_concurrent 1
	}
	reverse_proxy %s
}`, testcaddy.Options(t), port, upstream.Listener.Addr()))
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)

	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			first <- -1
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	select {
	case <-entered: // the first request holds the only slot
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the upstream")
	}
	resp, _ := testcaddy.Get(t, url)
	close(release)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request: status %d, want 429", resp.StatusCode)
	}
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	for _, h := range []string{"X-RateLimit-Remaining", "X-RateLimit-Limit", "RateLimit", "RateLimit-Policy"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("in-flight refusal carries %s: %q (the rate quota was not consulted)", h, v)
		}
	}
	if code := <-first; code != http.StatusOK {
		t.Errorf("first request: %d, want 200", code)
	}
	// The refusal spent no token: the next request passes and reports at
	// least 98 of 100 left (two taken; refill may have added some back).
	resp, _ = testcaddy.Get(t, url)
	rem, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
	if resp.StatusCode != http.StatusOK || err != nil || rem < 98 {
		t.Errorf("after the refusal: status %d, X-RateLimit-Remaining %q, want 200 and >= 98",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
}
