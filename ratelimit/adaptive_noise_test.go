package ratelimit

import "testing"

// noisyWindow ends one sample window of g at limit 6 (C = 5 behind it, the
// example's case after its capacity halved), every request finding the
// limit full: one request per factor, each factor × minRTT long.
func noisyWindow(t *testing.T, factors []float64) int64 {
	t.Helper()
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 500 * ms, MinRTTInterval: 30 * sec}
	g, now := measured(cfg, 200*ms)
	g.slowStart, g.est, g.lastR = false, 6, 1.05 // settled; the window before under the probe share
	g.limit.Store(6)
	g.windowEnd = now + 10*sec // the window is ended below, by hand
	for i, f := range factors {
		start := now + int64(i)*ms
		g.observe(start, start+int64(f*float64(200*ms)), 6, false)
	}
	g.update(now + sec)
	return g.Limit()
}

// One window of a dozen requests whose mean reads no queue (1.0 minRTT)
// with the spread a log-normal service time of a coefficient of variation
// of 0.3 gives (a standard error of 7 %) does not jump the limit by the
// headroom: in front of C = 5, at limit 6, such windows came by noise
// often enough that the limit went to 8 every few seconds, and the
// simulation's in flight after the capacity halved read up to 1.66 C.
// Before, this window took the limit from 6 to 7 (6 × 1.25 + 1, averaged
// with 6). A window as fast with little spread shows no queue beyond its
// noise and still grows the limit by the headroom: that is how the limit
// sees the capacity rise.
func TestGradientNoisyWindowDoesNotJump(t *testing.T) {
	noisy := []float64{0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.0, 1.05, 1.1, 1.2, 1.3, 1.4}
	if got := noisyWindow(t, noisy); got != 6 {
		t.Errorf("after a noisy window reading 1.0 minRTT: limit %d, want 6 (held within its noise)", got)
	}
	steady := []float64{0.98, 0.99, 1.0, 1.0, 1.01, 1.02, 0.98, 0.99, 1.0, 1.0, 1.01, 1.02}
	if got := noisyWindow(t, steady); got != 7 {
		t.Errorf("after a steady window at 1.0 minRTT: limit %d, want 7 (grown by the headroom)", got)
	}
}

// A probe that a stall of the gateway met reads minRTT less high: 20
// requests answered at 20 ms, 5 held by a 36 ms stall (answered at 56 ms,
// 2.8 × the median). Counted up to 3 medians they read 27.2 ms (1.36 ×);
// up to clipMedians, 24 ms (1.2 ×).
func TestGradientProbeMetByAStall(t *testing.T) {
	s := make([]int64, 0, 25)
	for range 20 {
		s = append(s, 20*ms)
	}
	for range 5 {
		s = append(s, 56*ms)
	}
	if got := clippedMean(s); got != 24*ms {
		t.Fatalf("clipped mean %v ms, want 24 ms", float64(got)/float64(ms))
	}
}
