package grayroute_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// hubGoroutines counts the goroutines running the analysis hub's code.
func hubGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("grayroute.(*analysisHub)")) {
			n++
		}
	}
	return n
}

// TestAnalysisHubIdleWithoutAnalysis: grayroute handlers whose rules have
// no analysis run no hub goroutine and no ticker; the first request of a
// rule with analysis on starts one, for that canary, which ends when the
// rule no longer has analysis on. Earlier tests' Caddy instances are
// stopped, so the count starts from none.
func TestAnalysisHubIdleWithoutAnalysis(t *testing.T) {
	rds := redistest.Start(t)
	addr, url := site(t)
	adminURL := runOnRedis(t, rds.URL(), "gray plain {\n\t\t\ttarget_version v2\n\t\t\tweight         50\n\t\t}", addr, `route /plain {
		grayroute plain
		respond "{http.grayroute.version}"
	}
	route /judged {
		grayroute judged
		respond "{http.grayroute.version}"
	}`)
	// Earlier tests' Caddy instances are stopped, but a canary goroutine that
	// has signalled its end may still be on its way out: count from zero.
	testcaddy.Eventually(t, 10*time.Second, "no analysis goroutine left from earlier tests", func() bool { return hubGoroutines() == 0 })
	before := 0
	for i := 0; i < 20; i++ {
		get(t, url+"plain", fmt.Sprintf("X-User-Id: u%d", i))
	}
	if n := hubGoroutines() - before; n != 0 {
		t.Fatalf("%d analysis goroutines more with no analysed traffic, want none", n)
	}
	rule := func(method, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, adminURL+"/sluice/rules/gray/judged", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, text := testcaddy.Do(t, req); resp.StatusCode != 200 {
			t.Fatalf("%s judged: %d %s", method, resp.StatusCode, text)
		}
	}
	rule(http.MethodPut, `{"target_version":"v2","fallback_version":"v1","weight":"50","analysis":"on","step_weight":"10","min_samples":"1000000"}`)
	testcaddy.Eventually(t, 10*time.Second, "a request of the analysed rule counted", func() bool {
		get(t, url+"judged", "X-User-Id: u1")
		return hubGoroutines()-before == 1
	})
	testcaddy.Eventually(t, 10*time.Second, "one goroutine for the analysed canary", func() bool { return hubGoroutines()-before == 1 })

	rule(http.MethodDelete, "")
	testcaddy.Eventually(t, 10*time.Second, "the canary's goroutine ended with its analysis", func() bool { return hubGoroutines() == before })
}

// TestAnalysisCatchesUpAfterRedisPause: with Redis paused, every Redis
// call of the analysis waits for its deadline (a quarter interval), and
// no interval can be judged on the fleet's counts. Six canaries judged
// every second judge none on their own counts instead (which would set
// this instance's evidence apart from the fleet's for good); once Redis
// is back, each judges every interval of the pause on the fleet's
// counts, none missing, none twice.
func TestAnalysisCatchesUpAfterRedisPause(t *testing.T) {
	rds := redistest.Start(t)
	addr, url := site(t)
	admin := testcaddy.FreePort(t)
	const canaries = 6
	var rules, routes strings.Builder
	for i := 0; i < canaries; i++ {
		fmt.Fprintf(&rules, `
		gray c%d {
			target_version    v2
			fallback_version  v1
			weight            50
			analysis          on
			analysis_interval 1s
			step_weight       10
			min_samples       1000000
		}`, i)
		fmt.Fprintf(&routes, "\troute /c%d {\n\t\tgrayroute c%d\n\t\trespond \"{http.grayroute.version}\"\n\t}\n", i, i)
	}
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		redis %s%s
	}
}
%s {
%s}
`, admin, rds.URL(), rules.String(), addr, routes.String()))
	adminURL := fmt.Sprintf("http://localhost:%d", admin)

	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				resp, err := client.Get(fmt.Sprintf("%sc%d", url, i%canaries))
				if err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()

	type interval struct {
		Interval int64     `json:"interval"`
		At       time.Time `json:"at"`
		Scope    string    `json:"scope"`
	}
	history := func() map[string][]interval {
		_, body := testcaddy.Get(t, adminURL+"/sluice/state")
		var st struct {
			Grayroute struct {
				Analysis []struct {
					Rule      string     `json:"rule"`
					Intervals []interval `json:"intervals"`
				} `json:"analysis"`
			} `json:"grayroute"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("/sluice/state: %v %s", err, body)
		}
		out := map[string][]interval{}
		for _, a := range st.Grayroute.Analysis {
			out[a.Rule] = a.Intervals
		}
		return out
	}
	testcaddy.Eventually(t, 30*time.Second, "every canary judged on the fleet's counts", func() bool {
		h := history()
		for i := 0; i < canaries; i++ {
			iv := h[fmt.Sprintf("c%d", i)]
			if len(iv) == 0 || iv[len(iv)-1].Scope != "fleet" {
				return false
			}
		}
		return true
	})

	const paused = 8 * time.Second
	before := history()
	rds.Pause()
	time.Sleep(paused) // sleep: Redis stays paused this long while the canaries try to judge
	during := history()
	rds.Resume()

	for i := 0; i < canaries; i++ {
		rule := fmt.Sprintf("c%d", i)
		if n, m := len(before[rule]), len(during[rule]); m > n+1 { // one may have been judged as the pause began
			t.Errorf("%s: %d intervals judged while Redis was paused", rule, m-n)
		}
	}
	var caughtUp map[string][]interval
	testcaddy.Eventually(t, 30*time.Second, "every canary judged the intervals of the pause", func() bool {
		caughtUp = history()
		for i := 0; i < canaries; i++ {
			rule := fmt.Sprintf("c%d", i)
			b, iv := before[rule], caughtUp[rule]
			if len(iv) == 0 || iv[len(iv)-1].Interval < b[len(b)-1].Interval+int64(paused/time.Second)+1 {
				return false
			}
		}
		return true
	})
	for i := 0; i < canaries; i++ {
		rule := fmt.Sprintf("c%d", i)
		iv := caughtUp[rule]
		for k, r := range iv {
			if r.Scope != "fleet" {
				t.Errorf("%s: interval %d judged on %q counts", rule, r.Interval, r.Scope)
			}
			if k > 0 && r.Interval != iv[k-1].Interval+1 {
				t.Errorf("%s: interval %d follows %d: intervals missing or judged twice", rule, r.Interval, iv[k-1].Interval)
			}
		}
		t.Logf("%s: %d intervals judged, %d to %d", rule, len(iv), iv[0].Interval, iv[len(iv)-1].Interval)
	}
}
