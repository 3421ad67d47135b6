package grayroute

import (
	"math"
	"strings"
	"testing"
	"time"
)

// fill puts n requests of latency d into v.
func fill(v *VersionCounts, n uint64, d time.Duration) {
	v.Requests += n
	v.Latency[LatencyBucket(d)] += n
}

// TestAnalysisSlowCanaryFromItsFirstInterval: the example's settings
// (min_samples 200, weight 20 %, +10 per step), 100 canary and 400
// baseline requests an interval, the canary 80 ms slower. Each interval's
// slowest requests are its own, so the latency test has evidence from the
// first interval on, with no wait for a baseline percentile: the weight is
// never advanced, and two failing intervals roll the canary back, for
// latency, by interval 4.
func TestAnalysisSlowCanaryFromItsFirstInterval(t *testing.T) {
	a := NewAnalysis(AnalysisConfig{MinSamples: 200, StepWeight: 1000, MaxWeight: 5000, FailureThreshold: 2,
		MinLatencyDelta: DefaultMinLatencyDelta})
	for i := 1; i <= 6; i++ {
		var c IntervalCounts
		for j := uint64(0); j < 100; j++ {
			fill(&c.Baseline, 4, time.Duration(5+j%10)*time.Millisecond)
			fill(&c.Canary, 1, time.Duration(85+j%10)*time.Millisecond)
		}
		v := a.Observe(&c, 2000)
		t.Logf("interval %d: %s %s: %s", i, v.Outcome, v.Action, v.Reason())
		switch {
		case v.Action == Advance || v.Action == Promote:
			t.Fatalf("interval %d: %s a canary 80 ms slower: %s", i, v.Action, v.Reason())
		case i == 1 && v.LatencyEvidence <= 0:
			t.Fatalf("interval 1: latency evidence %.2f, want evidence of a slower canary already", v.LatencyEvidence)
		case v.Action == Rollback:
			if i > 4 || !strings.Contains(v.Reason(), "canary slower") {
				t.Fatalf("rolled back at interval %d: %s; want by interval 4, for latency", i, v.Reason())
			}
			return
		}
	}
	t.Fatal("never rolled back")
}

// TestAnalysisAdvancesOnEvidence: a canary as fast as its baseline is
// advanced once the latency check has cleared its weight; the next
// weight needs its own evidence (its score starts afresh).
func TestAnalysisAdvancesOnEvidence(t *testing.T) {
	a := NewAnalysis(AnalysisConfig{MinSamples: 100, StepWeight: 1000, MaxWeight: 5000, FailureThreshold: 2,
		MinLatencyDelta: DefaultMinLatencyDelta})
	weight := uint32(2000)
	var last Verdict
	for i := 1; i <= 40 && weight == 2000; i++ {
		var c IntervalCounts
		for j := uint64(0); j < 100; j++ {
			fill(&c.Baseline, 4, time.Duration(1+j%20)*time.Millisecond)
			fill(&c.Canary, 1, time.Duration(1+j%20)*time.Millisecond)
		}
		v := a.Observe(&c, weight)
		if v.Action == Hold {
			if v.Outcome != Inconclusive {
				t.Fatalf("interval %d: held as %s: %s", i, v.Outcome, v.Reason())
			}
			continue
		}
		if v.Action != Advance || v.StepLatencyEvidence > v.PassBound {
			t.Fatalf("interval %d: %s with step evidence %.2f (pass at %.2f): %s", i, v.Action, v.StepLatencyEvidence, v.PassBound, v.Reason())
		}
		weight, last = v.Weight, v
	}
	if weight != 3000 {
		t.Fatalf("weight %d, want 3000", weight)
	}
	var c IntervalCounts
	fill(&c.Baseline, 400, 2*time.Millisecond)
	fill(&c.Canary, 100, 2*time.Millisecond)
	v := a.Observe(&c, weight)
	if here := v.LatencyEvidence - last.LatencyEvidence; math.Abs(v.StepLatencyEvidence-here) > 1e-9 {
		t.Fatalf("first interval at the new weight: step evidence %.2f, want this interval's alone (%.2f)", v.StepLatencyEvidence, here)
	}
}
