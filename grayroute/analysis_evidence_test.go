package grayroute

import (
	"strings"
	"testing"
	"time"
)

// fill puts n requests of latency d into v.
func fill(v *VersionCounts, n uint64, d time.Duration) {
	v.Requests += n
	v.Latency[LatencyBucket(d)] += n
}

// TestAnalysisHoldsWithoutLatencyEvidence: the example's settings
// (min_samples 200, weight 20 %, +10 per step), 100 canary and 400
// baseline requests an interval, the canary 80 ms slower. Once the canary
// has its 200 requests the baseline has 800, too few for its p99 (1,000):
// the latency check has no evidence yet, so the weight is held, never
// advanced; with the baseline's p99 known (from interval 4 on), two
// failing intervals roll the canary back.
func TestAnalysisHoldsWithoutLatencyEvidence(t *testing.T) {
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
			t.Fatalf("interval %d: %s on no latency evidence: %s", i, v.Action, v.Reason())
		case i == 2 && !strings.Contains(v.Reason(), "needs 1000 baseline requests"):
			t.Fatalf("interval 2 (baseline 800): %q, want it to say the latency test needs 1000 baseline requests", v.Reason())
		case v.Action == Rollback:
			if i > 5 || !strings.Contains(v.Reason(), "canary slower") {
				t.Fatalf("rolled back at interval %d: %s; want by interval 5, for latency", i, v.Reason())
			}
			return
		}
	}
	t.Fatal("never rolled back")
}

// TestAnalysisAdvancesOnEvidence: a canary as fast as its baseline is held
// until the latency check has cleared its weight, then advanced; the next
// weight needs its own evidence.
func TestAnalysisAdvancesOnEvidence(t *testing.T) {
	a := NewAnalysis(AnalysisConfig{MinSamples: 100, StepWeight: 1000, MaxWeight: 5000, FailureThreshold: 2,
		MinLatencyDelta: DefaultMinLatencyDelta})
	weight, held := uint32(2000), 0
	for i := 1; i <= 40 && weight == 2000; i++ {
		var c IntervalCounts
		for j := uint64(0); j < 100; j++ {
			fill(&c.Baseline, 4, time.Duration(1+j%20)*time.Millisecond)
			fill(&c.Canary, 1, time.Duration(1+j%20)*time.Millisecond)
		}
		v := a.Observe(&c, weight)
		if v.Action == Hold {
			held++
			if v.Outcome != Inconclusive {
				t.Fatalf("interval %d: held as %s: %s", i, v.Outcome, v.Reason())
			}
			continue
		}
		if v.Action != Advance || v.StepLatencyEvidence > v.PassBound {
			t.Fatalf("interval %d: %s with step evidence %.2f (pass at %.2f): %s", i, v.Action, v.StepLatencyEvidence, v.PassBound, v.Reason())
		}
		weight = v.Weight
	}
	if weight != 3000 || held < 2 {
		t.Fatalf("weight %d after %d held intervals, want 3000 after at least 2 (the baseline's p99 first)", weight, held)
	}
	var c IntervalCounts
	fill(&c.Baseline, 400, 2*time.Millisecond)
	fill(&c.Canary, 100, 2*time.Millisecond)
	if v := a.Observe(&c, weight); v.Action != Hold || v.StepLatencyEvidence != 0 {
		t.Fatalf("first interval at the new weight: %s, step evidence %.2f; want hold on no evidence yet", v.Action, v.StepLatencyEvidence)
	}
}
