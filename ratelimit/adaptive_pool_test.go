package ratelimit

import "testing"

// A periodic minRTT probe after a window within the tolerance, once minRTT
// pools a probe's worth of samples, admits 3/4 of what the upstream served
// (n/r), not half the estimate nor min_limit: at min_limit 4 and 200 ms a
// probe of 25 requests took 1.3 s, and in flight dipped to 0.4 C over most
// of a 2 s span. It takes 4 round trips of samples (probeRounds). A probe
// that agrees with the last within their noise is pooled with it: one
// probe of 25 requests at a coefficient of variation of 0.3 reads within
// about ±12 %, and the limit follows minRTT's error.
func TestGradientPeriodicProbeAtThreeQuartersOfServedPooled(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 3, MaxLimit: 1000, InitialLimit: 40, Tolerance: 0.25,
		SampleWindow: 100 * ms, MinRTTInterval: sec}
	g, now := measured(cfg, 20*ms)
	g.slowStart = false
	// Windows at 22 ms with the limit full (r = 1.1: within the
	// tolerance), until the due probe starts.
	for end := now + 2*sec; now < end && !g.state().Measuring; now += ms {
		g.observe(now-22*ms, now, g.Limit(), false)
	}
	st := g.state()
	if want := int64(0.75 * g.lastServed); !st.Measuring || st.Limit != want || float64(want) <= st.Estimate/2 {
		t.Fatalf("the due probe after windows within the tolerance: %+v, want measuring at 3/4 of the %.1f served (%d), above half the estimate", st, g.lastServed, want)
	}
	if g.probeSamples != 4*int(st.Limit) {
		t.Fatalf("a probe at %d takes %d samples, want 4 round trips (%d)", st.Limit, g.probeSamples, 4*st.Limit)
	}
	// The probe reads 21 ms, within the noise of the first (20 ms, every
	// sample alike: no noise of its own, so the probe's samples carry it:
	// 14 and 28 ms in turn, a relative error of 3 % over its 120):
	// pooled, minRTT lies between the two.
	start := now
	for i := 0; i < g.probeSamples; i++ {
		now += ms
		rtt := int64(14*ms + 14*ms*int64(i%2)) // mean 21 ms
		g.observe(max(start, now-rtt), max(start, now-rtt)+rtt, 10, false)
	}
	if st := g.state(); st.Measuring || st.MinRTT <= 0.020 || st.MinRTT >= 0.021 {
		t.Fatalf("after an agreeing probe at 21 ms: %+v, want minRTT pooled between 20 and 21 ms", st)
	}
}
