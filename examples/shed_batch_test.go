package examples_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestShedBatch: examples/shed-batch with the example upstream (4 workers
// of 100 ms, 40 req/s) behind it, and open-loop load of twice that:
// interactive requests at 30/s and batch ones (X-Priority: sheddable) at
// 50/s. The interactive requests are served at 90 % or more of what they
// asked and at most 5 % refused, the batch ones take at least 80 % of the
// refusals, and a refusal names its class.
func TestShedBatch(t *testing.T) {
	s := startScenario(t, "shed-batch", 9001)
	startUpstream(t, s.port[9001], "-capacity", "4", "-work", "100ms")
	url := s.gateway + "/work"
	type counts struct{ asked, ok, refused, other atomic.Int64 }
	var inter, batch counts
	var wrongClass atomic.Int64
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	send := func(c *counts, prio string) {
		c.asked.Add(1)
		req, _ := http.NewRequest("GET", url, nil)
		if prio != "" {
			req.Header.Set("X-Priority", prio)
		}
		resp, err := client.Do(req)
		if err != nil {
			c.other.Add(1)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			c.ok.Add(1)
		case 503:
			c.refused.Add(1)
			want := "normal"
			if prio != "" {
				want = prio
			}
			if resp.Header.Get("Sluice-Priority") != want {
				wrongClass.Add(1)
			}
		default:
			c.other.Add(1)
		}
	}
	// Warm-up at the service's pace: the first probe and windows.
	load(4*time.Second, 30, func() { send(&inter, "") })
	inter = counts{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); load(10*time.Second, 30, func() { send(&inter, "") }) }()
	go func() { defer wg.Done(); load(10*time.Second, 50, func() { send(&batch, "sheddable") }) }()
	wg.Wait()
	iOK := float64(inter.ok.Load()) / float64(inter.asked.Load())
	iRef := float64(inter.refused.Load()) / float64(inter.asked.Load())
	refused := inter.refused.Load() + batch.refused.Load()
	bShare := float64(batch.refused.Load()) / float64(max(refused, 1))
	t.Logf("interactive: %d asked, %d ok, %d refused; batch: %d asked, %d ok, %d refused; batch's share of refusals %.2f",
		inter.asked.Load(), inter.ok.Load(), inter.refused.Load(), batch.asked.Load(), batch.ok.Load(), batch.refused.Load(), bShare)
	if iOK < 0.9 || iRef > 0.05 {
		t.Errorf("interactive served %.3f (want ≥ 0.9), refused %.3f (want ≤ 0.05)", iOK, iRef)
	}
	if refused == 0 || bShare < 0.8 {
		t.Errorf("batch took %.2f of %d refusals, want ≥ 0.8 of some", bShare, refused)
	}
	if n := inter.other.Load() + batch.other.Load(); n > 0 {
		t.Errorf("%d requests failed or got another status", n)
	}
	if n := wrongClass.Load(); n > 0 {
		t.Errorf("%d refusals named the wrong class in Sluice-Priority", n)
	}
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `sluice_ratelimit_shed_total{class="sheddable"`) {
		t.Errorf("no shed_total for the sheddable class in /metrics")
	}
}

// load calls f at rate per second for d, each call in its own goroutine
// (open loop: a slow answer does not slow the sending), and waits for all.
func load(d time.Duration, rate float64, f func()) {
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	end := time.After(d)
	for {
		select {
		case <-end:
			wg.Wait()
			return
		case <-tick.C:
			wg.Add(1)
			go func() { defer wg.Done(); f() }()
		}
	}
}
