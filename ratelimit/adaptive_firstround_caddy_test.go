package ratelimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A fresh adaptive limit in Caddy: the requests beyond initial_limit wait
// for slow start's first step instead of being refused, as many as that
// step can admit (here initial_limit 2 and max_limit 4: 2 wait); the rest
// are refused at once, and a waiter whose client goes away gives its
// place back. At the first answer the limit goes to 4 and the waiters are
// served. Before, all 6 requests beyond initial_limit were refused.
func TestAdaptiveFirstRoundWaitsInCaddy(t *testing.T) {
	var arrived atomic.Int64
	release := make(chan struct{}) // one send answers one request; closed: all
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "upstream")
	}))
	defer up.Close()
	var closed atomic.Bool
	answerAll := func() {
		if closed.CompareAndSwap(false, true) {
			close(release)
		}
	}
	defer answerAll()
	s := caddyfile(t, `	rulestore {
		rate_limit fresh {
			qps 100000
			key_resolver global
			max_concurrent adaptive
			min_limit 1
			initial_limit 2
			max_limit 4
			sample_window 30s
			min_rtt_interval 5m
			concurrency_status 503
		}
	}`, fmt.Sprintf("ratelimit fresh\n\treverse_proxy %s", strings.TrimPrefix(up.URL, "http://")))
	testcaddy.Run(t, s.cfg)
	waiting := func() float64 {
		_, fl := flowOf(t, s.adminPort, "fresh")
		a, _ := fl["adaptive"].(map[string]any)
		if a == nil {
			return -1
		}
		return a["waiting_first_step"].(float64)
	}

	statuses := make(chan int, 16)
	send := func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.urls[0], nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			statuses <- 0 // the client went away
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses <- resp.StatusCode
	}
	for i := 0; i < 2; i++ {
		go send(context.Background())
	}
	testcaddy.Eventually(t, 10*time.Second, "initial_limit's 2 requests at the upstream", func() bool { return arrived.Load() == 2 })

	// A waiter whose client goes away gives its place back.
	ctx, cancel := context.WithCancel(context.Background())
	go send(ctx)
	testcaddy.Eventually(t, 10*time.Second, "one request waiting for the first step", func() bool { return waiting() == 1 })
	cancel()
	if got := <-statuses; got != 0 {
		t.Fatalf("the cancelled waiter's client got %d", got)
	}
	testcaddy.Eventually(t, 10*time.Second, "the cancelled waiter's place given back", func() bool { return waiting() == 0 })

	// Six more: two wait (the step takes the limit to max_limit 4), four
	// are refused at once.
	for i := 0; i < 6; i++ {
		go send(context.Background())
	}
	for i := 0; i < 4; i++ {
		select {
		case got := <-statuses:
			if got != http.StatusServiceUnavailable {
				t.Fatalf("before any answer: a request answered %d, want 503 (no room to wait)", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("before any answer: %d of 4 refusals came", i)
		}
	}
	testcaddy.Eventually(t, 10*time.Second, "two requests waiting", func() bool { return waiting() == 2 })
	if n := arrived.Load(); n != 2 {
		t.Fatalf("before the first answer %d requests reached the upstream, want initial_limit 2", n)
	}

	// The first answer is slow start's first step: the waiters go on.
	release <- struct{}{}
	if got := <-statuses; got != 200 {
		t.Fatalf("first answer: %d", got)
	}
	testcaddy.Eventually(t, 10*time.Second, "the two waiters at the upstream", func() bool { return arrived.Load() == 4 && waiting() == 0 })
	answerAll()
	for i := 0; i < 3; i++ {
		select {
		case got := <-statuses:
			if got != 200 {
				t.Fatalf("answer %d after the step: %d, want 200", i+2, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after the step: %d of 3 answers came", i)
		}
	}
	_, fl := flowOf(t, s.adminPort, "fresh")
	if a, _ := fl["adaptive"].(map[string]any); a == nil || a["limit"] != 4.0 {
		t.Fatalf("after the first step: %v, want limit 4 (max_limit)", fl)
	}
}
