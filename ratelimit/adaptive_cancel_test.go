package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// max_concurrent adaptive leaves client cancels out of its latency: once
// minRTT is measured (and the state shows it and a sampled latency),
// requests whose clients leave while the upstream holds them, each lasting
// many minRTTs, do not move the limit. Counted as samples they would halve
// it; counted as drops they would back it off.
func TestAdaptiveIgnoresClientCancels(t *testing.T) {
	up := newSlowUpstream(t)
	s := adaptiveSite(t, up, `
			min_limit 2
			initial_limit 10
			sample_window 50ms
			min_rtt_interval 1h`)
	testcaddy.Run(t, s.cfg)
	adaptive := func() map[string]any {
		_, fl := flowOf(t, s.adminPort, "adapt")
		a, _ := fl["adaptive"].(map[string]any)
		return a
	}
	var a map[string]any
	testcaddy.Eventually(t, 20*time.Second, "minRTT measured, the probes agreeing, and a window sampled", func() bool {
		status(t, s.urls[0]) // the first probes, then windows
		a = adaptive()
		return a != nil && a["probing"] == false && a["latency"].(float64) > 0 && a["next_probe"].(float64) > 60
	})
	minRTT := time.Duration(a["min_rtt"].(float64) * 1e9)
	hold := max(20*time.Millisecond, 10*minRTT)
	testcaddy.Eventually(t, 10*time.Second, "no request in flight", func() bool { n, _ := flowOf(t, s.adminPort, "adapt"); return n == 0 })
	before := adaptive()["limit"]
	for i := 0; i < 30; i++ {
		n := up.arrived.Load()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", s.urls[0], nil)
		req.Header.Set("X-Block", "1")
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				err = fmt.Errorf("answered %d", resp.StatusCode)
				resp.Body.Close()
			}
			done <- err
		}()
		testcaddy.Eventually(t, 10*time.Second, "request held by the upstream", func() bool { return up.arrived.Load() > n })
		time.Sleep(hold) // sleep: the cancelled request must last many minRTTs, so counting it would move the limit
		cancel()
		if err := <-done; err == nil || ctx.Err() == nil {
			t.Fatalf("request %d: %v, want the client's cancel", i+1, err)
		}
		testcaddy.Eventually(t, 10*time.Second, "the cancelled request left", func() bool { n, _ := flowOf(t, s.adminPort, "adapt"); return n == 0 })
	}
	if after := adaptive(); after["limit"] != before || after["probing"] != false {
		t.Fatalf("after 30 cancels of %v each (minRTT %v): %v, want the limit unchanged at %v", hold, minRTT, after, before)
	}
}

// adaptiveSite is a route in front of up with the rule adapt: global,
// max_concurrent adaptive, and the rule's other fields given.
func adaptiveSite(t *testing.T, up *slowUpstream, fields string) setup {
	t.Helper()
	return caddyfile(t, `	rulestore {
		rate_limit adapt {
			qps 100000
			key_resolver global
			max_concurrent adaptive`+fields+`
		}
	}`, fmt.Sprintf("ratelimit adapt\n\treverse_proxy %s", hostPort(up)))
}
