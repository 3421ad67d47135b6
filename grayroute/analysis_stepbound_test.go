package grayroute

import (
	"testing"
	"time"
)

// quietIntervals feeds intervals of 100 canary requests and no baseline
// request: nothing to compare the canary with, so no latency evidence
// accumulates either way.
func quietIntervals(t *testing.T, cfg AnalysisConfig, n int) []Verdict {
	t.Helper()
	a := NewAnalysis(cfg)
	const w = 2000
	var out []Verdict
	for i := 0; i < n; i++ {
		var c IntervalCounts
		fill(&c.Canary, 100, 10*time.Millisecond)
		out = append(out, a.Observe(&c, w))
	}
	return out
}

// TestAnalysisStepBound: intervals without evidence hold the weight
// (saying that they bring none) until max_step_duration, then
// advance, or with on_no_evidence hold stay held and marked.
func TestAnalysisStepBound(t *testing.T) {
	cfg := AnalysisConfig{MinSamples: 100, StepWeight: 1000, MaxWeight: 5000, MinLatencyDelta: DefaultMinLatencyDelta, MaxStepIntervals: 5}
	vs := quietIntervals(t, cfg, 5)
	for i, v := range vs[:4] {
		if v.Action != Hold || v.NoEvidence || v.StepLatencyEvidence != 0 {
			t.Fatalf("interval %d: %v, no evidence %v, score here %.2f: %s", i+1, v.Action, v.NoEvidence, v.StepLatencyEvidence, v.Reason())
		}
	}
	if v := vs[4]; v.Action != Advance || !v.NoEvidence || v.StepIntervals != 5 || v.StepQuietIntervals != 5 {
		t.Fatalf("at the bound: %v, no evidence %v, %d intervals (%d quiet): %s", v.Action, v.NoEvidence, v.StepIntervals, v.StepQuietIntervals, v.Reason())
	} else {
		t.Log(v.Reason())
	}

	cfg.HoldWithoutEvidence = true
	vs = quietIntervals(t, cfg, 9)
	for i, v := range vs[4:] {
		if v.Action != Hold || !v.NoEvidence || v.Outcome != Inconclusive {
			t.Fatalf("on_no_evidence hold, interval %d: %v %v, no evidence %v: %s", i+5, v.Outcome, v.Action, v.NoEvidence, v.Reason())
		}
	}

	cfg.HoldWithoutEvidence, cfg.MaxStepIntervals = false, 0
	for _, v := range quietIntervals(t, cfg, 20) {
		if v.Action != Hold || v.NoEvidence {
			t.Fatalf("without a bound: %v, no evidence %v: %s", v.Action, v.NoEvidence, v.Reason())
		}
	}
}
