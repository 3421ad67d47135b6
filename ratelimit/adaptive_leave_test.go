package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// Clients that hang up while their requests wait in the adaptive limit's
// queue leave nothing behind: the queue empties at once (each counted as
// queue_timeout), none of them reaches the upstream, the one slot stays
// with the request holding it, and once that request ends the next ones
// are admitted at once, one at a time.
func TestAdaptiveQueuedClientsLeave(t *testing.T) {
	up := newSlowUpstream(t)
	s := adaptiveSite(t, up, `
			min_limit 1
			max_limit 1
			initial_limit 1
			max_queue_wait 1m
			min_rtt_interval 1h`)
	testcaddy.Run(t, s.cfg)
	queue := func() (inFlight int64, waiting, timedOut float64) {
		inFlight, fl := flowOf(t, s.adminPort, "adapt")
		a, _ := fl["adaptive"].(map[string]any)
		q, _ := a["queue"].(map[string]any)
		normal, _ := q["normal"].(map[string]any)
		waiting, _ = normal["waiting"].(float64)
		timedOut, _ = normal["queue_timeout"].(float64)
		return inFlight, waiting, timedOut
	}

	// One request holds the only slot.
	held := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", s.urls[0], nil)
		req.Header.Set("X-Block", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	testcaddy.Eventually(t, 10*time.Second, "the first request at the upstream", func() bool { return up.arrived.Load() == 1 })

	// 20 more wait in the queue; their clients hang up.
	const n = 20
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", s.urls[0], nil)
			req.Header.Set("X-Block", "1")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				err = fmt.Errorf("answered %d", resp.StatusCode)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	testcaddy.Eventually(t, 10*time.Second, fmt.Sprintf("%d requests waiting", n), func() bool {
		_, waiting, _ := queue()
		return waiting == n
	})
	cancel()
	for i := 0; i < n; i++ {
		if err := <-errs; ctx.Err() == nil || err == nil {
			t.Fatalf("waiting request %d: %v, want the client's cancel", i+1, err)
		}
	}
	testcaddy.Eventually(t, 10*time.Second, "the queue empty, the slot still held", func() bool {
		inFlight, waiting, timedOut := queue()
		return inFlight == 1 && waiting == 0 && timedOut == n
	})
	if got := up.arrived.Load(); got != 1 {
		t.Fatalf("%d requests reached the upstream, want only the one holding the slot", got)
	}

	// The held request ends; the slot is free for the next, one by one.
	up.unblock()
	if code := <-held; code != http.StatusOK {
		t.Fatalf("the held request: %d, want 200", code)
	}
	testcaddy.Eventually(t, 10*time.Second, "no request in flight", func() bool { n, _, _ := queue(); return n == 0 })
	for i := 0; i < 5; i++ {
		if code := status(t, s.urls[0]); code != http.StatusOK {
			t.Fatalf("request %d after the hang-ups: %d, want 200", i+1, code)
		}
	}
	if inFlight, waiting, timedOut := queue(); inFlight != 0 || waiting != 0 || timedOut != n {
		t.Fatalf("after: in flight %d, waiting %v, queue_timeout %v; want 0, 0, %d", inFlight, waiting, timedOut, n)
	}
}
