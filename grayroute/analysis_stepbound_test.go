package grayroute

import (
	"testing"
	"time"
)

// quietIntervals feeds a busy interval that puts the baseline's p99 near
// 500 ms, then calm ones (every request 10 ms): no request of either
// version is slow, so no latency evidence accumulates either way.
func quietIntervals(t *testing.T, cfg AnalysisConfig, calm int) []Verdict {
	t.Helper()
	a := NewAnalysis(cfg)
	const w = 2000
	var busy IntervalCounts
	busy.Baseline.Requests, busy.Canary.Requests = 1000, 250
	busy.Baseline.Latency[LatencyBucket(10*time.Millisecond)] = 900
	busy.Baseline.Latency[LatencyBucket(500*time.Millisecond)] = 100
	busy.Canary.Latency[LatencyBucket(10*time.Millisecond)] = 225
	busy.Canary.Latency[LatencyBucket(500*time.Millisecond)] = 25
	a.Observe(&busy, w)
	var out []Verdict
	for i := 0; i < calm; i++ {
		var c IntervalCounts
		c.Baseline.Requests, c.Canary.Requests = 400, 100
		c.Baseline.Latency[LatencyBucket(10*time.Millisecond)] = 400
		c.Canary.Latency[LatencyBucket(10*time.Millisecond)] = 100
		out = append(out, a.Observe(&c, w))
	}
	return out
}

// TestAnalysisStepBound: calm intervals after a busy one hold the weight
// (saying that they bring no evidence) until max_step_duration, then
// advance, or with on_no_evidence hold stay held and marked.
func TestAnalysisStepBound(t *testing.T) {
	cfg := AnalysisConfig{MinSamples: 100, StepWeight: 1000, MaxWeight: 5000, MinLatencyDelta: DefaultMinLatencyDelta, MaxStepIntervals: 5}
	vs := quietIntervals(t, cfg, 4)
	for i, v := range vs[:3] {
		if v.Action != Hold || v.NoEvidence || v.StepLatencyEvidence != 0 {
			t.Fatalf("calm interval %d: %v, no evidence %v, score here %.2f: %s", i+2, v.Action, v.NoEvidence, v.StepLatencyEvidence, v.Reason())
		}
	}
	if v := vs[3]; v.Action != Advance || !v.NoEvidence || v.StepIntervals != 5 || v.StepQuietIntervals != 4 {
		t.Fatalf("at the bound: %v, no evidence %v, %d intervals (%d quiet): %s", v.Action, v.NoEvidence, v.StepIntervals, v.StepQuietIntervals, v.Reason())
	} else {
		t.Log(v.Reason())
	}

	cfg.HoldWithoutEvidence = true
	vs = quietIntervals(t, cfg, 8)
	for i, v := range vs[3:] {
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
