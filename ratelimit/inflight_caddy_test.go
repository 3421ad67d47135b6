package ratelimit_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestInFlightCapWithoutQPS: a rule with max_concurrent_total alone (no
// qps), inline and declared in the rulestore block, caps requests in
// flight and nothing else: 300 requests in a row pass without a quota
// header, and while one request is held a second is refused with
// too_many_in_flight.
func TestInFlightCapWithoutQPS(t *testing.T) {
	ups := []*slowUpstream{newSlowUpstream(t), newSlowUpstream(t)} // one per site: unblock is for good
	s := caddyfile(t, `	rulestore {
		rate_limit cap {
			max_concurrent_total 1
			key_resolver         global
		}
	}`, fmt.Sprintf(`
	ratelimit {
		max_concurrent_total 1
		key_resolver         global
	}
	reverse_proxy %s`, hostPort(ups[0])), fmt.Sprintf(`
	ratelimit cap
	reverse_proxy %s`, hostPort(ups[1])))
	testcaddy.Run(t, s.cfg)
	for i, url := range s.urls {
		up := ups[i]
		for n := 0; n < 300; n++ {
			resp, _ := testcaddy.Get(t, url)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s request %d: %d, want 200 (no rate)", url, n+1, resp.StatusCode)
			}
			for name := range resp.Header {
				if strings.HasPrefix(strings.ToLower(name), "ratelimit") || strings.HasPrefix(strings.ToLower(name), "x-ratelimit") {
					t.Fatalf("%s request %d: header %s, want no quota header (the rule has no quota)", url, n+1, name)
				}
			}
		}
		before := up.arrived.Load()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Block", "1")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		testcaddy.Eventually(t, 10*time.Second, "the held request at the upstream", func() bool { return up.arrived.Load() > before })
		resp, body := testcaddy.Get(t, url)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "too_many_in_flight") {
			t.Fatalf("%s with one request held: %d %q, want 429 too_many_in_flight", url, resp.StatusCode, body)
		}
		up.unblock()
		wg.Wait()
	}
}
