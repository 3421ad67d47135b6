package ratelimit

import (
	"slices"
	"testing"
)

// A first minRTT of 8 samples (initial_limit 8: a standard error of about
// 10 % at a coefficient of variation of 0.3) that read 20 % low is pooled
// with slow start's first window, which is 3 standard errors of the
// difference wide while minRTT rests on fewer than 10 samples, not 2.
// Before, the window (1.25 × that minRTT, 24 % away against 2 standard
// errors of 22 %) was left out, latency without any queue read as one,
// slow start stopped, and in front of a healthy 200 ms service the
// simulation refused 15–73 % of the requests in 5 seeds of 400 (the
// first minRTT 0.78–0.84 × the service time). The pooled window itself
// holds the limit (read against the minRTT before pooling it was over the
// probe share, as a queue's would be); the next window grows it.
func TestGradientFirstMinRTTOfFewSamplesPoolsWithSlowStart(t *testing.T) {
	// The first probe: answers around 160 ms.
	g, now := firstProbeAt160ms(t, []float64{0.6, 0.75, 0.9, 1.0, 1.0, 1.1, 1.25, 1.4}, 0)
	limit := g.Limit()
	// Slow start's windows: the limit's worth of requests around 200 ms
	// (no queue: the service is healthy), each finding it full.
	factors := []float64{0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.4}
	window := func(limit int64) {
		for i := int64(0); i < limit; i++ {
			f := factors[i%int64(len(factors))]
			g.observe(now+i*ms, now+i*ms+int64(f*float64(200*ms)), limit, false)
		}
		now += limit*ms + int64(1.4*float64(200*ms))
	}
	window(limit)
	st := g.state()
	if st.MinRTT < 0.175 {
		t.Errorf("after slow start's first window at 200 ms: minRTT %v s; want it pooled with the window (above 0.175 s)", st.MinRTT)
	}
	// The window read over the probe share by the minRTT it was measured
	// against: it holds (a window of a queue pooled the same way would
	// have jumped into it) and slow start goes on.
	if got := g.Limit(); got != limit {
		t.Errorf("after slow start's first window, pooled: limit %d, want it held at %d", got, limit)
	}
	window(limit)
	if got := g.Limit(); got <= limit {
		t.Errorf("after slow start's second window without a queue: limit %d, want above %d (slow start goes on)", got, limit)
	}
}

// The first minRTT's own spread, of 8 samples, is itself a guess: 8
// latencies of a service at a coefficient of variation of 0.3 can lie
// close together and read 20 % low at once (the simulation's seed 697 at
// 200 ms: 159.5 ms with a standard error of 6 %, where 10.6 % is the
// service's). Judged against that spread, slow start's first window of 70
// answers at the true 200 ms (21 % away: 3.02 of their own standard
// errors of the difference, 2.07 of the shared one) was left out; latency without a queue read 1.25 minRTT, and the
// limit was cut step by step until a re-measurement 6 s on: 17 % of the
// requests refused in front of a healthy upstream. While minRTT rests on
// fewer than fewFirstSamples, the difference is judged against the spread
// the two samples share (Student's pooled variance) when that is wider.
func TestGradientFirstMinRTTOfCloseSamplesPoolsWithSlowStart(t *testing.T) {
	// 160 ms, close together; 60 clients: the other 52 found the limit full.
	g, now := firstProbeAt160ms(t, []float64{0.85, 0.9, 0.95, 1.0, 1.0, 1.05, 1.1, 1.15}, 52)
	limit := g.Limit()
	if limit != 64 {
		t.Fatalf("after the first probe: limit %d, want slow start's jump to 64", limit)
	}
	// Slow start's first window: 70 answers around 200 ms at a
	// coefficient of variation of 0.3, no queue.
	factors := []float64{0.55, 0.6, 0.65, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.4, 1.5, 1.55}
	for i := int64(0); i < 70; i++ {
		g.observe(now+i*ms, now+i*ms+int64(factors[i%int64(len(factors))]*float64(200*ms)), limit, false)
	}
	if st := g.state(); st.MinRTT < 0.18 {
		t.Errorf("after slow start's first window at 200 ms: minRTT %v s; want it pooled with the window (above 0.18 s)", st.MinRTT)
	}
	// In the simulation: those seeds refuse nothing now.
	for _, seed := range []int64{457, 697, 1201} {
		if share := simHealthy(200*ms, seed).refusedShare(); share > 0.03 {
			t.Errorf("healthy 200 ms upstream, seed %d: %.1f %% refused, want <= 3 %%", seed, 100*share)
		}
	}
}

// firstProbeAt160ms is a fresh controller (the example's settings) after
// its first minRTT: 8 requests admitted at once and answered at these
// multiples of 160 ms, with refused requests found the limit full. It
// returns the controller and the time of the last answer.
func firstProbeAt160ms(t *testing.T, factors []float64, refused int) (*gradient, int64) {
	t.Helper()
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 500 * ms, MinRTTInterval: 30 * sec}
	g := newGradient(cfg, sec)
	now := int64(sec)
	var ends []int64
	for _, f := range factors {
		ends = append(ends, now+int64(f*float64(160*ms)))
	}
	slices.Sort(ends)
	for range refused {
		g.refuse()
	}
	for _, end := range ends {
		g.observe(now, end, 8, false)
	}
	if st := g.state(); st.Measuring || st.MinRTT < 0.155 || st.MinRTT > 0.165 {
		t.Fatalf("after the first probe: %+v; want minRTT of about 0.16 s", st)
	}
	return g, ends[len(ends)-1]
}
