package ratelimit

import "testing"

// probeAround runs one minRTT probe of g from now: 25 answers spread
// evenly over ±5 % around rtt. It returns the time the probe ended.
func probeAround(t *testing.T, g *gradient, now, rtt int64) int64 {
	t.Helper()
	g.startMeasure(now, false)
	end := now
	for i := range minRTTSamples {
		start := now + int64(i)*ms
		d := rtt + rtt*int64(i-minRTTSamples/2)/int64(10*(minRTTSamples/2))
		end = start + d
		g.observe(start, end, g.probeAt, false)
	}
	if g.measuring {
		t.Fatalf("the probe did not end after %d answers", minRTTSamples)
	}
	return end
}

// A probe far from minRTT (beyond 2 standard errors of the difference)
// still replaces it, but the next probe comes after 10 sample windows, not
// min_rtt_interval, and if it is nearer the replaced pool that pool comes
// back and takes it in. In the simulation one probe in a few hundred read
// 25 % high by its noise alone (253 ms for a 200 ms service) and held
// 1.5 C in flight at C = 5 until the next probe 30 s later. A latency that
// really moved is kept once the next probe agrees with it.
func TestGradientProbeFarOffIsCheckedByTheNext(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 500 * ms, MinRTTInterval: 30 * sec}
	setup := func() (*gradient, int64) {
		g, now := measured(cfg, 200*ms)
		g.minRTT, g.minRTTMean, g.minRTTErr, g.minRTTN = 200*ms, 200*ms, 0.03, maxPooled // four probes that agreed
		g.slowStart = false
		return g, now
	}

	g, now := setup()
	now = probeAround(t, g, now, 250*ms)
	if st := g.state(); st.MinRTT != 0.25 {
		t.Fatalf("after a probe at 250 ms: minRTT %v, want 0.25 (replaced)", st.MinRTT)
	}
	if due := g.nextMeasure - now; due > 10*cfg.SampleWindow {
		t.Fatalf("the next probe is due %v ms after one that replaced minRTT; want within 10 sample windows (5 s)", due/ms)
	}
	probeAround(t, g, g.nextMeasure, 200*ms)
	if st := g.state(); st.MinRTT != 0.2 || g.minRTTN != maxPooled {
		t.Errorf("after the next probe at 200 ms: minRTT %v of %d samples; want the pool of 0.2 s and %d samples back",
			st.MinRTT, g.minRTTN, maxPooled)
	}

	g, now = setup()
	now = probeAround(t, g, now, 250*ms)
	probeAround(t, g, g.nextMeasure, 250*ms)
	if st := g.state(); st.MinRTT != 0.25 || g.minRTTN != 2*minRTTSamples {
		t.Errorf("after two probes at 250 ms: minRTT %v of %d samples; want 0.25 s of %d (the latency moved)", st.MinRTT, g.minRTTN, 2*minRTTSamples)
	}
}
