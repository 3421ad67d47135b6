package ratelimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// slowUpstream holds requests with "X-Block: 1" until release is closed or
// the client goes away; "X-Fail: 1" drops the connection (a proxy error).
type slowUpstream struct {
	*httptest.Server
	arrived atomic.Int64
	release chan struct{}
}

func newSlowUpstream(t *testing.T) *slowUpstream {
	u := &slowUpstream{release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.arrived.Add(1)
		switch {
		case r.Header.Get("X-Fail") == "1":
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		case r.Header.Get("X-Block") == "1":
			select {
			case <-u.release:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "upstream")
	}))
	t.Cleanup(u.Close)
	t.Cleanup(func() { u.unblock() })
	return u
}

var unblockMu sync.Mutex

func (u *slowUpstream) unblock() {
	unblockMu.Lock()
	defer unblockMu.Unlock()
	select {
	case <-u.release:
	default:
		close(u.release)
	}
}

func hostPort(u *slowUpstream) string { return strings.TrimPrefix(u.URL, "http://") }

func TestMaxConcurrentRejectsAndReleases(t *testing.T) {
	up := newSlowUpstream(t)
	s := caddyfile(t, "", fmt.Sprintf(`
	ratelimit {
		qps 10000
		key_resolver global
		max_concurrent 2
		concurrency_status 503
	}
	reverse_proxy %s`, hostPort(up)))
	testcaddy.Run(t, s.cfg)

	// Slots come back after proxy errors.
	for i := 0; i < 5; i++ {
		if got := status(t, s.urls[0], "X-Fail: 1"); got != http.StatusBadGateway {
			t.Fatalf("failing upstream: %d, want 502", got)
		}
	}
	// Slots come back after client cancels.
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		before := up.arrived.Load()
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(ctx, "GET", s.urls[0], nil)
			req.Header.Set("X-Block", "1")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		testcaddy.Eventually(t, 10*time.Second, "blocked request at upstream", func() bool { return up.arrived.Load() > before })
		cancel()
		<-done
	}
	// Cancelled requests release their slots when Caddy notices the cancel,
	// which may be after the client gave up: wait until none is in flight.
	testcaddy.Eventually(t, 10*time.Second, "no request in flight", func() bool {
		_, m := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/metrics", s.adminPort))
		lines := 0
		for _, line := range strings.Split(m, "\n") {
			if strings.HasPrefix(line, "sluice_ratelimit_in_flight{") {
				lines++
				if !strings.HasSuffix(line, " 0") {
					return false
				}
			}
		}
		return lines > 0
	})
	// Now exactly two fit: two blocked requests hold both slots...
	before := up.arrived.Load()
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", s.urls[0], nil)
			req.Header.Set("X-Block", "1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	// (cancelled requests may still be finishing in Caddy: wait until the
	// third is refused rather than assume it at once)
	testcaddy.Eventually(t, 10*time.Second, "two requests at the upstream", func() bool { return up.arrived.Load() >= before+2 })
	resp, body := testcaddy.Get(t, s.urls[0])
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "too_many_in_flight") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third concurrent request: %d %q, want 503 too_many_in_flight with Retry-After", resp.StatusCode, body)
	}
	// ...and when they finish, the slots are free again.
	up.unblock()
	wg.Wait()
	for _, c := range codes {
		if c != 200 {
			t.Fatalf("held requests answered %v, want 200s", codes)
		}
	}
	expect(t, s.urls[0], []int{200, 200, 200})
}

func TestMaxConcurrentTotalAcrossKeys(t *testing.T) {
	up := newSlowUpstream(t)
	s := caddyfile(t, "", fmt.Sprintf(`
	ratelimit {
		qps 10000
		key_resolver userId
		max_concurrent_total 1
	}
	reverse_proxy %s`, hostPort(up)))
	testcaddy.Run(t, s.cfg)
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest("GET", s.urls[0], nil)
		req.Header.Set("X-Block", "1")
		req.Header.Set("X-User-Id", "a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	testcaddy.Eventually(t, 10*time.Second, "request at upstream", func() bool { return up.arrived.Load() == 1 })
	if got := status(t, s.urls[0], "X-User-Id: b"); got != 429 {
		t.Fatalf("another key while the rule's one slot is held: %d, want 429", got)
	}
	up.unblock()
	if c := <-done; c != 200 {
		t.Fatalf("held request: %d", c)
	}
	expect(t, s.urls[0], []int{200}, "X-User-Id: b")
}
