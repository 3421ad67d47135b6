package ratelimit

import (
	"math/rand"
	"testing"
	"time"
)

// A due minRTT probe waits while the limit does not bind. In front of a
// healthy upstream whose demand (40 closed-loop clients at 10 ms) stays
// below the limit, minRTT decides nothing, and the probe (the limit at
// min_limit until 25 requests have been measured) refused 37 of the 40
// clients for several round trips every min_rtt_interval: 65 s from a
// fresh start saw refusals at about 30 s and 60 s. Once demand meets the
// limit, the overdue probe runs at the next window.
func TestGradientProbesOnlyWhileTheLimitBinds(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: DefaultMinLimit, MaxLimit: DefaultMaxLimit, InitialLimit: DefaultInitialLimit,
		Tolerance: DefaultLatencyTolerance, SampleWindow: int64(DefaultSampleWindow), MinRTTInterval: int64(DefaultMinRTTInterval)}
	start := sec
	g := newGradient(cfg, start)
	dur := 2*int64(DefaultMinRTTInterval) + 5*sec
	n, last := runClosedLoop(g, rand.New(rand.NewSource(1)), 40, 10*ms, start, dur)
	if last > start+500*ms {
		t.Fatalf("healthy upstream, demand below the limit, %v: %d refused, the last %v after the start (%+v); want none after the start-up (500ms)",
			time.Duration(dur), n, time.Duration(last-start), g.state())
	}
	// Demand above a capacity of 20: the limit binds, and the overdue
	// probe takes it to min_limit.
	lo, _, _ := runGradient(g, &simUpstream{capacity: 20, base: 10 * ms}, start+dur, 500*ms)
	if lo != cfg.MinLimit {
		t.Fatalf("once the limit binds: lowest limit %d in 500ms, want a probe at min_limit %d (%+v)", lo, cfg.MinLimit, g.state())
	}
}
