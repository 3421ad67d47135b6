package grayroute_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// cohortInterval is the analysis_interval of the analysed rules below.
const cohortInterval = 200 * time.Millisecond

// cohortState is the part of /sluice/state a cohort test reads: the last
// judged interval of one canary, with the canary's totals so far.
type cohortState struct {
	Interval         int64  `json:"interval"`
	CanaryRequests   uint64 `json:"canary_requests"`
	BaselineRequests uint64 `json:"baseline_requests"`
	Action           string `json:"action"`
}

func lastInterval(t *testing.T, adminURL, rule string) (cohortState, bool) {
	t.Helper()
	_, body := testcaddy.Get(t, adminURL+"/sluice/state")
	var st struct {
		Grayroute struct {
			Analysis []struct {
				Rule      string        `json:"rule"`
				Intervals []cohortState `json:"intervals"`
			} `json:"analysis"`
		} `json:"grayroute"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/sluice/state: %v %s", err, body)
	}
	for _, a := range st.Grayroute.Analysis {
		if a.Rule == rule && len(a.Intervals) > 0 {
			return a.Intervals[len(a.Intervals)-1], true
		}
	}
	return cohortState{}, false
}

// TestAnalysisCountsOnlyHashAssignedRequests: the analysis compares the
// canary's and the baseline's cohorts, so only requests the weighted hash
// split between them are counted. Requests forced to a version are not:
// those a tag rule ahead of the canary sends to v2, every request while
// the weight is 100 or 0, and the canary's share diverted to v1 by
// fallback_on_open while its breaker is open. Each phase is checked, once
// an interval that started after its last request has been judged, in
// the canary's totals on /sluice/state and in the analysis metrics: they
// are exactly the untagged, hash-split requests, by the version that
// answered them.
func TestAnalysisCountsOnlyHashAssignedRequests(t *testing.T) {
	addr, url := site(t)
	admin := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		circuit_breaker cohort-breaker {
			key               {http.vars.gray_version}
			failure_threshold 1000
		}
		gray cohort-beta {
			match_tag      X-Beta
			target_version v2
		}
		gray cohort {
			target_version    v2
			fallback_version  v1
			weight            50
			fallback_on_open  cohort-breaker
			analysis          on
			analysis_interval %v
			min_samples       1000000
			step_weight       10
		}
	}
}
%s {
	grayroute cohort-beta cohort
	@v2 vars gray_version v2
	handle @v2 {
		circuitbreaker cohort-breaker
		respond "v2"
	}
	respond "v1"
}
`, admin, cohortInterval, addr))
	adminURL := fmt.Sprintf("http://localhost:%d", admin)

	// The metrics live for the process (across reloads and tests): compare
	// what this test adds.
	series := func(v string) string {
		return fmt.Sprintf(`sluice_grayroute_analysis_requests_total{rule="cohort",version="%s"}`, v)
	}
	base := map[string]float64{"v1": counter(t, admin, series("v1")), "v2": counter(t, admin, series("v2"))}
	betaSeries := `sluice_grayroute_requests_total{rule="cohort-beta",version="v2"}`
	betaBase := counter(t, admin, betaSeries)

	// want are the cohorts' expected totals: the untagged, hash-split
	// requests by the version that answered.
	want := map[string]uint64{}
	sendUsers := func(n int, headers ...string) map[string]int {
		t.Helper()
		got := map[string]int{}
		for i := 0; i < n; i++ {
			got[get(t, url, append([]string{fmt.Sprintf("X-User-Id: u%d", i)}, headers...)...)]++
		}
		return got
	}
	// check waits for an interval that started after the last request to
	// be judged (intervals are judged in order, so every request sent so
	// far is in the totals), then compares the totals.
	check := func(phase string) {
		t.Helper()
		sent := time.Now().UnixNano()
		var last cohortState
		testcaddy.Eventually(t, 30*time.Second, phase+": an interval after the last request judged", func() bool {
			var ok bool
			last, ok = lastInterval(t, adminURL, "cohort")
			return ok && last.Interval*int64(cohortInterval) > sent
		})
		if last.CanaryRequests != want["v2"] || last.BaselineRequests != want["v1"] || last.Action != "hold" {
			t.Fatalf("%s: /sluice/state counts %d canary (v2), %d baseline (v1) requests, action %q; want %d and %d (the hash-split requests only), hold",
				phase, last.CanaryRequests, last.BaselineRequests, last.Action, want["v2"], want["v1"])
		}
		for _, v := range []string{"v1", "v2"} {
			if got := counter(t, admin, series(v)) - base[v]; got != float64(want[v]) {
				t.Fatalf("%s: %s rose by %v, want %d", phase, series(v), got, want[v])
			}
		}
	}

	// Tagged users are forced to v2 by cohort-beta; untagged ones are split
	// 50/50 by the hash of their id.
	tagged := sendUsers(60, "X-Beta: yes")
	if tagged["v2"] != 60 {
		t.Fatalf("tagged requests answered %v, want all 60 by v2", tagged)
	}
	split := sendUsers(200)
	if split["v1"] == 0 || split["v2"] == 0 || split["v1"]+split["v2"] != 200 {
		t.Fatalf("untagged requests answered %v, want both versions", split)
	}
	want["v1"], want["v2"] = uint64(split["v1"]), uint64(split["v2"])
	check("tagged and untagged requests")
	if got := counter(t, admin, betaSeries) - betaBase; got != 60 {
		t.Fatalf("cohort-beta routed %v requests to v2, want the 60 tagged ones", got)
	}

	// Weight 100, then 0: nothing to compare, nothing counted.
	patch := func(body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPatch, adminURL+"/sluice/rules/gray/cohort", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, text := testcaddy.Do(t, req); resp.StatusCode != 200 {
			t.Fatalf("PATCH %s: %d %s", body, resp.StatusCode, text)
		}
	}
	patch(`{"weight":"100"}`)
	if got := sendUsers(100); got["v2"] != 100 {
		t.Fatalf("weight 100: answered %v, want all by v2", got)
	}
	patch(`{"weight":"0"}`)
	if got := sendUsers(100); got["v1"] != 100 {
		t.Fatalf("weight 0: answered %v, want all by v1", got)
	}
	check("weight 100 and 0")

	// Weight 50 with the breaker forced open: the same users, the canary's
	// share diverted to v1; only the baseline's share is counted.
	patch(`{"weight":"50"}`)
	if resp, text := testcaddy.Do(t, mustReq(t, "POST", adminURL+"/sluice/breakers/cohort-breaker/force_open")); resp.StatusCode != 200 {
		t.Fatalf("force_open: %d %s", resp.StatusCode, text)
	}
	if got := sendUsers(200); got["v1"] != 200 {
		t.Fatalf("breaker open: answered %v, want all by v1", got)
	}
	want["v1"] += uint64(split["v1"])
	check("fallback_on_open diversions")
}
