package ratelimit_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A flood of junk user ids through a real Caddy evicts a user who spent a
// calendar quota of 1,000 and owes 998 more (response_cost): the user is
// still refused, and the admin API still shows the quota spent and the
// debt.
func TestEvictedSpentKeyStaysRefusedInCaddy(t *testing.T) {
	tz, _ := quotaZone(t) // hours from its midnight: the day does not turn meanwhile
	up := usageUpstream(t)
	s := caddyfile(t, "", fmt.Sprintf(`
	ratelimit {
		id cal
		quota 1000
		period day
		timezone %s
		key_resolver userId
		max_keys 1000
		response_cost {http.response.header.X-Tokens-Used}
		reserve 1
	}
	reverse_proxy %s`, tz, up.URL))
	testcaddy.Run(t, s.cfg)
	admin := s.adminPort

	// Two responses of 999 each (the second admitted on the last unit):
	// 1,998 used, 998 owed.
	expect(t, s.urls[0]+"/?n=999", []int{200, 200, 429}, "X-User-Id: spender")
	u := mustQuota(t, admin, "cal", "user:spender")
	if !u.Tracked || u.Used != 1998 || u.Debt != 998 {
		t.Fatalf("before the flood: tracked %v used %v debt %v, want tracked, 1998 used, 998 debt", u.Tracked, u.Used, u.Debt)
	}

	// 20,000 junk ids (20 × max_keys), four at a time, each spending one.
	const junk = 20_000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	t.Cleanup(client.CloseIdleConnections)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= junk; i = next.Add(1) {
				req, _ := http.NewRequest("GET", s.urls[0]+"/?n=1", nil)
				req.Header.Set("X-User-Id", fmt.Sprintf("junk-%d", i))
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != 200 && resp.StatusCode != 429 {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d junk requests failed (neither 200 nor 429)", n)
	}

	code, u, body := quota(t, admin, http.MethodGet, "cal", "user:spender")
	if code != 200 {
		t.Fatalf("quota after the flood: %d %s", code, body)
	}
	if u.Tracked {
		t.Fatalf("the flood of %d ids did not evict the spender: %s", junk, body)
	}
	t.Logf("after the flood, the spender's usage: %s", strings.TrimSpace(body))
	if !strings.Contains(body, `"evicted":true`) || u.Used < 1998 || u.Debt < 998 || u.Remaining != 0 {
		t.Fatalf("after eviction: used %v of %v, debt %v, remaining %d (%s); want it spent, owing at least 998, marked evicted",
			u.Used, u.Limit, u.Debt, u.Remaining, body)
	}
	if code := status(t, s.urls[0]+"/?n=1", "X-User-Id: spender"); code != 429 {
		t.Fatalf("the evicted spender's next request: %d, want 429", code)
	}
}
