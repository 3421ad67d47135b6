package ratelimit

import (
	"math/rand"
	"testing"
	"time"
)

// runClosedLoop drives g as BenchmarkAdaptiveHealthyThroughput does, with
// simulated time: clients in a closed loop against a healthy upstream that
// answers in lat (plus up to 1 ms of the gateway's own) at any
// concurrency. A client sends again as soon as it is answered; a refused
// request costs it lat before it sends again. Time advances in 100 µs
// steps. During each stall [start, start+length) the gateway does not run,
// as in a GC pause or with the CPU taken by others: nothing is admitted or
// observed, and what finished meanwhile is observed at the stall's end
// with its latency inflated. It returns how many requests were refused and
// when the last was (0 if none).
func runClosedLoop(g *gradient, rng *rand.Rand, clients int, lat, now, dur int64, stalls ...[2]int64) (refused int, lastRefused int64) {
	type client struct {
		busy          bool
		start, n, due int64 // due: the answer if busy, else the next send
	}
	cs := make([]client, clients)
	for i := range cs {
		cs[i].due = now + rng.Int63n(lat) // clients arrive at random phases
	}
	var inflight int64
	const step = ms / 10
	for end := now + dur; now < end; now += step {
		stalled := false
		for _, s := range stalls {
			stalled = stalled || now >= s[0] && now < s[0]+s[1]
		}
		if stalled {
			continue
		}
		for i := range cs {
			if c := &cs[i]; c.busy && c.due <= now {
				g.observe(c.start, now, c.n, false)
				inflight--
				c.busy, c.due = false, now
			}
		}
		for i := range cs {
			c := &cs[i]
			if c.busy || c.due > now {
				continue
			}
			if inflight >= g.Limit() {
				refused, lastRefused = refused+1, now
				g.refuse()
				c.due = now + lat + rng.Int63n(ms)
				continue
			}
			inflight++
			c.busy, c.start, c.n, c.due = true, now, inflight, now+lat+rng.Int63n(ms)
		}
	}
	return refused, lastRefused
}

// A healthy upstream (10 ms at any concurrency, 40 clients, as in
// BenchmarkAdaptiveHealthyThroughput) with the default settings: once the
// start-up is over (minRTT measured at min_limit, then slow start), no
// request is refused, and a stall of the gateway (a GC pause, the CPU
// taken by other processes) of 20 to 100 ms, which inflates the latency
// of every request in flight across it as a queue would, stops no request
// more than 3 sample windows after it. Before, a stall in slow start's
// short windows was taken for the first queue: the limit fell to half or
// less (40 to 20) and grew back by about 12 % a 250 ms window, so requests
// were refused for 1 to 2.5 s after it.
func TestGradientHealthyUpstreamRecoversFromStalls(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: DefaultMinLimit, MaxLimit: DefaultMaxLimit, InitialLimit: DefaultInitialLimit,
		Tolerance: DefaultLatencyTolerance, SampleWindow: int64(DefaultSampleWindow), MinRTTInterval: int64(DefaultMinRTTInterval)}
	const clients, lat = 40, 10 * ms
	const recover = 3 * int64(DefaultSampleWindow) // refusals end this long after a stall at most
	start := sec
	for seed := int64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewSource(seed))
		g := newGradient(cfg, start)
		if n, last := runClosedLoop(g, rng, clients, lat, start, 2*sec); last > start+500*ms {
			t.Errorf("seed %d, no stall: %d refused, the last %v after the start (%+v); want none after 500ms",
				seed, n, time.Duration(last-start), g.state())
		}
	}
	// Stalls of 20 to 100 ms at times through the start-up (minRTT is
	// measured in about 100 ms, slow start lasts a few round trips more:
	// every 7 ms) and in the steady state (every 97 ms).
	for _, length := range []int64{20 * ms, 40 * ms, 60 * ms, 100 * ms} {
		for at := 90 * ms; at <= 1500*ms; at += stallStep(at) {
			rng := rand.New(rand.NewSource(at + length))
			g := newGradient(cfg, start)
			stall := [2]int64{start + at, length}
			n, last := runClosedLoop(g, rng, clients, lat, start, 3*sec, stall)
			if done := max(start+500*ms, stall[0]+length+recover); last > done {
				t.Errorf("stall of %v at %v: %d refused, the last %v after the stall (%+v); want none after %v",
					time.Duration(length), time.Duration(at), n, time.Duration(last-stall[0]-length), g.state(), time.Duration(recover))
			}
		}
	}
}

// stallStep spaces the stalls tried: densely through the start-up, where
// windows are one round trip long, sparsely after.
func stallStep(at int64) int64 {
	if at < 300*ms {
		return 7 * ms
	}
	return 97 * ms
}

// A slow-start window whose requests did not find the limit full (the
// requests that filled it finished after a limit's worth of earlier ones,
// as happens when clients come back at random times) is no queue: slow
// start goes on, and the next window that finds the limit full doubles it.
// Before, such a window ended slow start at initial_limit, and the limit
// then grew by about 12 % a 250 ms window: the benchmark's other outlier.
func TestGradientSlowStartOutlivesAWindowNotFull(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 3, MaxLimit: 1000, InitialLimit: 20, Tolerance: 0.25,
		SampleWindow: 250 * ms, MinRTTInterval: 30 * sec}
	now := sec
	g := newGradient(cfg, now)
	now = answerFirstProbe(g, now, 10*ms, 3)
	if g.Limit() != 20 || g.state().Measuring {
		t.Fatalf("after measuring minRTT: %+v, want limit 20", g.state())
	}
	// 20 requests back at minRTT, admitted with 1 to 19 in flight, then
	// as many admitted with 20 in flight.
	now += 10 * ms
	for i := int64(1); i <= 20; i++ {
		now += ms
		g.observe(now-10*ms, now, min(i, 19), false)
	}
	for i := 0; i < 20; i++ {
		now += ms
		g.observe(now-10*ms, now, 20, false)
	}
	if l := g.Limit(); l != 40 {
		t.Fatalf("after a window not full and one full, both at minRTT: limit %d (%+v), want 40 (slow start doubling)", l, g.state())
	}
}
