package ratelimit

import "testing"

// A re-measurement started because a window after a cut looked like a
// slower upstream (fewer in flight, the same latency) ends with the cut it
// put off when the new minRTT still reads that latency as a queue, and
// with the limit as it was when the upstream did get slower.
func TestGradientRemeasureEndsWithTheCutItPutOff(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 250 * ms, MinRTTInterval: 30 * sec}
	for _, c := range []struct {
		name           string
		probeRTT       int64 // what the probe reads
		wantLo, wantHi float64
	}{
		// 10 in flight at 2 × minRTT: 5 served, plus the headroom of 1.
		{"minRTT unchanged: a queue", 200 * ms, 6, 6.1},
		// The upstream's latency doubled: no queue, the limit stays.
		{"minRTT doubled: a slower upstream", 400 * ms, 11, 11},
	} {
		g := newGradient(cfg, 0)
		g.mu.Lock()
		g.slowStart, g.measuring = false, false
		g.minRTT, g.minRTTMean, g.minRTTN, g.minRTTErr = 200*ms, 200*ms, 25, 0.01
		g.est = 11
		g.deferredN, g.deferredRTT = 10, 400*ms
		g.startMeasure(sec)
		g.mu.Unlock()
		for i := int64(0); i < minRTTSamples; i++ {
			g.observe(sec+i*ms, sec+i*ms+c.probeRTT, 4, false)
		}
		st := g.state()
		if st.Measuring {
			t.Fatalf("%s: still measuring after %d samples", c.name, minRTTSamples)
		}
		if st.Estimate < c.wantLo || st.Estimate > c.wantHi {
			t.Errorf("%s: estimate %.2f after the probe, want within [%.1f, %.1f]", c.name, st.Estimate, c.wantLo, c.wantHi)
		}
	}
}
