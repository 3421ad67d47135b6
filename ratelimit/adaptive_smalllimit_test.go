package ratelimit

import (
	"testing"
	"time"
)

// Small limits at long service times (200 ms, C = 5: a limit of 6 is
// 1.2 C, 7 is 1.4 C) need decisions on more evidence than a 500 ms window
// of a dozen requests gives. smallLimit is a controller past slow start
// with minRTT 200 ms at an estimate of est, and the time.
func smallLimit(est float64) (*gradient, int64) {
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 500 * ms, MinRTTInterval: 30 * sec}
	g, now := measured(cfg, 200*ms)
	g.slowStart, g.est = false, est
	g.limit.Store(int64(est))
	return g, now + 300*ms
}

// feed answers k requests, one every gap, each rtt long with inflight in
// flight at its admission, and returns the time of the last.
func feed(g *gradient, now, k, gap, rtt, inflight int64) int64 {
	for i := int64(0); i < k; i++ {
		now += gap
		g.observe(now-rtt, now, inflight, false)
	}
	return now
}

// A cut confirmed by two windows is taken whole: 7 in flight at 1.4 ×
// minRTT serve 5, and the limit goes to 5 plus a headroom of 1. Averaged
// with the old estimate it stopped at 6.5, and one window that read low
// took it back to 7.
func TestGradientConfirmedCutIsTakenWhole(t *testing.T) {
	g, now := smallLimit(7)
	now = feed(g, now, 2*minRTTSamples, 20*ms, 280*ms, 7)
	if st := g.state(); st.Estimate != 6 {
		t.Fatalf("after two windows at 1.4 × minRTT with 7 in flight (%v): estimate %v, want 6 (%+v)", time.Duration(now), st.Estimate, st)
	}
}

// A periodic probe that disagrees with the pooled minRTT and replaces it
// is measured again within 10 windows, not min_rtt_interval later; and
// the window after any probe does not grow the limit (the probe drained
// the upstream's queue).
func TestGradientProbeThatReplacesMinRTTIsMeasuredAgainSoon(t *testing.T) {
	g, now := smallLimit(6)
	g.minRTTMean, g.minRTTErr, g.minRTTN = 200*ms, 0.02, maxPooled
	g.startMeasure(now, false)
	now = feed(g, now+240*ms, minRTTSamples, 10*ms, 240*ms, 4)
	if st := g.state(); st.Measuring || st.MinRTT != 0.24 {
		t.Fatalf("after a probe at 240 ms: %+v, want minRTT replaced", st)
	}
	if soon := now + 10*g.cfg.SampleWindow; g.nextMeasure > soon {
		t.Fatalf("next probe in %v, want within %v", time.Duration(g.nextMeasure-now), time.Duration(soon-now))
	}
	now += 300 * ms
	feed(g, now, minRTTSamples, 20*ms, 180*ms, 6)
	if st := g.state(); st.Estimate != 6 {
		t.Fatalf("first window after the probe, faster than it and full: estimate %v, want 6 held (%+v)", st.Estimate, st)
	}
}
