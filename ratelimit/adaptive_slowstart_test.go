package ratelimit

import "testing"

// Slow start: until the first queue, the limit doubles per round trip
// (a window ends once a limit's worth of requests admitted in it have
// finished), so with capacity to spare it reaches max_limit in a few round
// trips, where growing by the gradient per 250 ms window took seconds (20
// to 1000 at about 12 % a window: 35 windows, 9 s). Against a capacity it
// overshoots to at most twice what served without a queue, and the first
// queue takes the limit to what the upstream serves plus the headroom at
// once.
func TestGradientSlowStart(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 3, MaxLimit: 1000, InitialLimit: 20, Tolerance: 0.25,
		SampleWindow: 250 * ms, MinRTTInterval: 30 * sec}
	now := sec
	g := newGradient(cfg, now)
	// minRTT from the first 20 admitted at initial_limit: one round trip
	// of 10 ms; then 20, 40, ..., 640, 1000: 6 round trips (runGradient
	// refuses nothing, so there is no demand to count beyond doubling).
	_, _, now = runGradient(g, &simUpstream{capacity: 10000, base: 10 * ms}, now, 200*ms)
	if l := g.Limit(); l != 1000 {
		t.Fatalf("capacity to spare, 200 ms in: limit %d (%+v), want max_limit 1000", l, g.state())
	}

	g = newGradient(cfg, now)
	up := &simUpstream{capacity: 40, base: 10 * ms}
	lo, hi, now := runGradient(g, up, now, 300*ms)
	if hi > 80 {
		t.Fatalf("capacity 40: the limit reached %d, want at most 2 × 40", hi)
	}
	if lo, hi, _ = runGradient(g, up, now, sec); lo < 40 || hi > 48 {
		t.Fatalf("capacity 40: limit %d..%d over the next second (%+v), want within [40, 48]", lo, hi, g.state())
	}
}
