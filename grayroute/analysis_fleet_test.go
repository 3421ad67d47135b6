package grayroute_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

const fleetCaddyfile = `{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
	}
}
http://127.0.0.1:%d {
	grayroute c
	@v2 vars gray_version v2
	handle @v2 {
		respond "v2"
	}
	respond "v1"
}
`

// TestAnalysisAdvancesOncePerIntervalAcrossTheFleet: two instances on one
// Redis judge a healthy canary on the same fleet totals. Each interval's
// verdict is written by at most one of them, and an instance that judges
// after the other's write has reached it must not take the new weight for
// the one the interval was counted at (which would advance the canary a
// second time on the same evidence). Every interval is judged on the
// fleet's totals (scope fleet); the weight climbs 10 → 15 → … → 40 one
// step per written verdict, then the canary is promoted once.
func TestAnalysisAdvancesOncePerIntervalAcrossTheFleet(t *testing.T) {
	rds := redistest.Start(t)
	urls, admins := startFleet(t, rds.URL())
	// Both versions answer alike; a generous latency ratio keeps a busy
	// machine's tail latency from ever holding or failing the canary. The
	// fleet's counts are read within a quarter of the interval (at least
	// 100 ms), else the instance judges its own: at 400 ms a busy machine
	// (two race-enabled test runs side by side) overran that 100 ms once
	// in 8 runs, and the interval was judged on local counts; at 1 s, two
	// full make test runs side by side overran its 250 ms once. At 2 s
	// the budget is 500 ms.
	rule := `{"target_version":"v2","fallback_version":"v1","analysis":"on","analysis_interval":"2s",
		"min_samples":"10","max_latency_ratio":"20","weight":"10","step_weight":"5","max_weight":"40","failure_threshold":"2"}`
	putGrayRule(t, admins[0], "c", rule)

	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		n    atomic.Int64
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := n.Add(1)
				req, _ := http.NewRequest(http.MethodGet, urls[i%2], nil)
				req.Header.Set("X-User-Id", fmt.Sprintf("u%d", i))
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	type written struct {
		interval        int64
		from, to        float64
		action, byAdmin string
	}
	// Each instance shows its last intervals only (a bounded history), and
	// a careful analysis may take longer than that window to promote on a
	// busy machine: the reports are gathered while the test waits, each
	// (instance, interval) once.
	var writes []written
	perInterval := map[int64]int{}
	seen := map[string]bool{}
	collect := func(final bool) {
		for _, a := range admins {
			_, body := testcaddy.Get(t, a+"/sluice/state")
			var st struct {
				Grayroute struct {
					Analysis []struct {
						Intervals []struct {
							Interval  int64   `json:"interval"`
							Action    string  `json:"action"`
							Weight    float64 `json:"weight"`
							NewWeight float64 `json:"new_weight"`
							Written   bool    `json:"written"`
							Scope     string  `json:"scope"`
						} `json:"intervals"`
					} `json:"analysis"`
				} `json:"grayroute"`
			}
			if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Grayroute.Analysis) > 1 ||
				final && len(st.Grayroute.Analysis) != 1 {
				t.Fatalf("%s /sluice/state: %v %s", a, err, body)
			}
			if len(st.Grayroute.Analysis) == 0 {
				continue // not analysing yet: its first counted request starts it
			}
			for _, iv := range st.Grayroute.Analysis[0].Intervals {
				k := fmt.Sprintf("%s/%d", a, iv.Interval)
				if seen[k] {
					continue
				}
				seen[k] = true
				if iv.Scope != "fleet" {
					t.Errorf("%s: interval %d judged on %q counts, want the fleet's", a, iv.Interval, iv.Scope)
				}
				if iv.Written {
					writes = append(writes, written{iv.Interval, iv.Weight, iv.NewWeight, iv.Action, a})
					perInterval[iv.Interval]++
				}
			}
		}
	}
	promoted := func(a string) bool {
		_, body := testcaddy.Get(t, a+"/sluice/rules/gray/c")
		return strings.Contains(body, `"state":"promoted"`)
	}
	last := time.Time{}
	testcaddy.Eventually(t, 120*time.Second, "the promotion on the first instance", func() bool {
		if time.Since(last) >= time.Second { // well within the 60 intervals each instance keeps
			collect(false)
			last = time.Now()
		}
		return promoted(admins[0])
	})
	testcaddy.Eventually(t, 10*time.Second, "the promotion on the second instance", func() bool { return promoted(admins[1]) })
	stop.Store(true)
	wg.Wait()
	collect(true)

	for iv, k := range perInterval {
		if k > 1 {
			t.Errorf("interval %d: verdict written %d times: %+v", iv, k, writes)
		}
	}
	// One write per step: 10→15, …, 35→40, then the promotion.
	steps := map[float64]int{}
	for _, w := range writes {
		if w.action == "advance" && w.to != w.from+5 || w.action == "promote" && w.from != 40 {
			t.Errorf("write %+v: not one step", w)
		}
		steps[w.to]++
	}
	for _, to := range []float64{15, 20, 25, 30, 35, 40, 100} {
		if steps[to] != 1 {
			t.Errorf("weight %g written %d times, want once: %+v", to, steps[to], writes)
		}
	}
	t.Logf("%d verdicts written over %d intervals", len(writes), len(perInterval))
}

// startFleet starts two Caddy instances on fleetCaddyfile with Redis at
// redisURL and waits until both are connected; it returns their sites'
// and admin endpoints' URLs.
func startFleet(t *testing.T, redisURL string) (urls, admins []string) {
	t.Helper()
	for i := 0; i < 2; i++ {
		port := testcaddy.FreePort(t)
		p := testcaddy.Start(t, fmt.Sprintf(fleetCaddyfile, redisURL, port))
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d/", port))
		admins = append(admins, fmt.Sprintf("http://localhost:%d", p.AdminPort))
	}
	for _, a := range admins {
		testcaddy.Eventually(t, 10*time.Second, "redis connected on "+a, func() bool {
			_, body := testcaddy.Get(t, a+"/sluice/store")
			return strings.Contains(body, `"connected":true`)
		})
	}
	return urls, admins
}

// putGrayRule writes gray rule id (JSON fields) through admin's API.
func putGrayRule(t *testing.T, admin, id, rule string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, admin+"/sluice/rules/gray/"+id, strings.NewReader(rule))
	req.Header.Set("Content-Type", "application/json")
	if resp, body := testcaddy.Do(t, req); resp.StatusCode != 200 {
		t.Fatalf("PUT rule: %d %s", resp.StatusCode, body)
	}
}
