package grayroute_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// recordCanaryEvents is an events.handlers module that keeps the canary
// events it sees.
type recordCanaryEvents struct{}

var canaryEvents struct {
	mu   sync.Mutex
	list []caddy.Event
}

func (recordCanaryEvents) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.graytest_record", New: func() caddy.Module { return recordCanaryEvents{} }}
}

func (recordCanaryEvents) Handle(_ context.Context, e caddy.Event) error {
	canaryEvents.mu.Lock()
	defer canaryEvents.mu.Unlock()
	canaryEvents.list = append(canaryEvents.list, e)
	return nil
}

func init() { caddy.RegisterModule(recordCanaryEvents{}) }

func eventsNamed(name string) []caddy.Event {
	canaryEvents.mu.Lock()
	defer canaryEvents.mu.Unlock()
	var out []caddy.Event
	for _, e := range canaryEvents.list {
		if e.Name() == name {
			out = append(out, e)
		}
	}
	return out
}

// TestAnalysisEventsAndMetrics: a canary that always fails (v2 answers
// 500) emits gray_analysis every interval with its figures, gray_rolled_back
// once from the analysis, and gray_promoted from a manual promote; the
// per-version analysis metrics count what the analysis counted.
func TestAnalysisEventsAndMetrics(t *testing.T) {
	canaryEvents.mu.Lock()
	canaryEvents.list = nil
	canaryEvents.mu.Unlock()
	addr, url := site(t)
	admin := testcaddy.FreePort(t)
	cfgJSON, err := testcaddy.Adapt(fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		gray ev {
			target_version    v2
			fallback_version  v1
			analysis          on
			analysis_interval 200ms
			min_samples       20
			step_weight       50
			failure_threshold 2
		}
	}
}
%s {
	grayroute ev
	@v2 vars gray_version v2
	handle @v2 {
		respond "v2 down" 500
	}
	respond "v1"
}
`, admin, addr))
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON = testcaddy.SubscribeEvents(t, cfgJSON, "graytest_record", "gray_analysis", "gray_rolled_back", "gray_promoted")
	testcaddy.RunJSON(t, cfgJSON)
	adminURL := fmt.Sprintf("http://localhost:%d", admin)

	n := 0
	testcaddy.Eventually(t, 60*time.Second, "gray_rolled_back", func() bool {
		for i := 0; i < 20; i++ {
			n++
			testcaddy.Get(t, url, fmt.Sprintf("X-User-Id: u%d", n))
		}
		return len(eventsNamed("gray_rolled_back")) > 0
	})
	rb := eventsNamed("gray_rolled_back")
	if len(rb) != 1 {
		t.Fatalf("gray_rolled_back %d times, want once", len(rb))
	}
	d := rb[0].Data
	if d["rule"] != "ev" || d["source"] != "analysis" || d["action"] != "rollback" || d["written"] != true ||
		d["new_weight"] != 0.0 || d["weight"] != 50.0 {
		t.Fatalf("gray_rolled_back data %v", d)
	}
	cr, ce := d["canary_requests"].(uint64), d["canary_errors"].(uint64)
	if cr < 20 || ce != cr || d["baseline_errors"].(uint64) != 0 || d["baseline_requests"].(uint64) == 0 ||
		d["error_evidence"].(float64) < d["fail_bound"].(float64) {
		t.Fatalf("gray_rolled_back figures %v: want every one of >= 20 canary requests failed, no baseline error, evidence past the bound", d)
	}
	// Every interval judged is a gray_analysis event; the one that rolled
	// back carries the same figures, and the one before it was failing too
	// (failure_threshold 2).
	// (Events are dispatched in order on their own goroutine: the interval's
	// gray_analysis follows its gray_rolled_back.)
	var an []caddy.Event
	at := -1
	testcaddy.Eventually(t, 10*time.Second, "the rollback's gray_analysis", func() bool {
		an = eventsNamed("gray_analysis")
		return len(an) > 0 && an[len(an)-1].Data["action"] == "rollback"
	})
	for i, e := range an {
		if e.Data["rule"] != "ev" || e.Data["source"] != "local" {
			t.Fatalf("gray_analysis data %v", e.Data)
		}
		if e.Data["action"] == "rollback" {
			at = i
		}
	}
	if at < 1 || an[at].Data["canary_requests"] != d["canary_requests"] || an[at-1].Data["outcome"] != "failing" {
		t.Fatalf("gray_analysis events around the rollback: %d events, rollback at %d", len(an), at)
	}

	// The metrics: everything the analysis counted on v2 failed, nothing
	// on v1; the failing intervals and the evidence are there.
	m := func(series string) float64 { return counter(t, admin, series) }
	// The interval in progress at the rollback is still added when it
	// closes: read until both counters have it.
	var v2n, v2e float64
	testcaddy.Eventually(t, 10*time.Second, "v2's counters settled", func() bool {
		v2n, v2e = m(`sluice_grayroute_analysis_requests_total{rule="ev",version="v2"}`), m(`sluice_grayroute_analysis_errors_total{rule="ev",version="v2"}`)
		return v2n >= float64(cr) && v2e == v2n
	})
	if v1n, v1e := m(`sluice_grayroute_analysis_requests_total{rule="ev",version="v1"}`), m(`sluice_grayroute_analysis_errors_total{rule="ev",version="v1"}`); v1n == 0 || v1e != 0 {
		t.Errorf("v1: %v requests, %v errors counted; want some, no errors", v1n, v1e)
	}
	if f := m(`sluice_grayroute_analysis_intervals_total{outcome="failing",rule="ev"}`); f < 2 {
		t.Errorf("failing intervals %v, want at least 2", f)
	}
	if e := m(`sluice_grayroute_analysis_evidence{rule="ev",test="errors"}`); e < d["fail_bound"].(float64) {
		t.Errorf("error evidence %v, want at least %v", e, d["fail_bound"])
	}

	// A manual promote emits gray_promoted with source manual.
	resp, text := testcaddy.Do(t, mustReq(t, "POST", adminURL+"/sluice/canary/ev/promote"))
	if resp.StatusCode != 200 {
		t.Fatalf("promote: %d %s", resp.StatusCode, text)
	}
	testcaddy.Eventually(t, 10*time.Second, "gray_promoted", func() bool { return len(eventsNamed("gray_promoted")) > 0 })
	if p := eventsNamed("gray_promoted"); len(p) != 1 || p[0].Data["source"] != "manual" || p[0].Data["rule"] != "ev" {
		t.Fatalf("gray_promoted: %v", p)
	}
}
