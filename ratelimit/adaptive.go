package ratelimit

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// AdaptiveConfig is the gradient controller of max_concurrent adaptive.
type AdaptiveConfig struct {
	MinLimit, MaxLimit, InitialLimit int64
	// Tolerance: a sampled latency up to minRTT×(1+Tolerance) does not
	// cut the limit (it grows or holds); above it the limit goes to what
	// the upstream serves plus the headroom.
	Tolerance float64
	// SampleWindow (ns): how often the limit is recomputed from the
	// latencies seen. MinRTTInterval (ns): how often the uncontended
	// latency is measured again.
	SampleWindow, MinRTTInterval int64
}

// minRTTSamples is how many requests, admitted at min_limit concurrency,
// make one minRTT measurement (their mean, each at most 3× the median:
// clippedMean).
const minRTTSamples = 25

// lowerErrs: a window of at least slowStartRound requests whose mean
// latency plus this many of its standard errors is below minRTT shows
// that minRTT was measured high (a stall or the CPU taken by others
// during the measurement, or its own noise); minRTT becomes that bound,
// which is above the window's mean: taken whole, the mean of the one
// window whose noise read it low carried minRTT below the uncontended
// latency, and latency without a queue then looked like one. It only
// ever lowers minRTT, and a queue only raises latency, so queued latency
// never becomes minRTT this way.
const lowerErrs = 3

// maxWindowSamples bounds the latencies kept per sample window; beyond it
// later ones overwrite earlier ones (memory stays fixed).
const maxWindowSamples = 1024

// dropShare: a window in which more than this share of requests failed
// (5xx or an upstream error) backs the limit off by backoff, whatever the
// latency. Rarer failures are taken for the application's own errors, not
// overload, so they do not starve the limit.
const (
	dropShare = 0.05
	backoff   = 0.9
)

// smoothing is the weight of a window's new limit against the old one: the
// latencies of a window come from requests admitted up to one RTT before,
// so taking the new value whole overshoots and oscillates.
const smoothing = 0.5

// probeShare: latency below this share of the tolerance above minRTT
// counts as no queue worth the name (noise, an upstream a little slower
// under load), so the limit keeps growing, gently, towards it.
const probeShare = 0.5

// slowStartRound: in slow start a window ends, besides at sample_window,
// once this many requests admitted in it (and at least the limit) have
// finished: one round trip at the new limit, so the limit doubles per
// round trip as TCP's slow start does, not per window.
const slowStartRound = 10

// sameLatency: when a cut is followed by a window with more than this share
// fewer requests in flight (more than a window's noise) and latency within
// this share of the cut window's, the latency is not a queue (a queue
// shrinks with what is let in, and so does its wait) but a slower
// upstream, and minRTT is measured again.
const sameLatency = 0.125

// gradient is one rule's adaptive in-flight limit, after Envoy's adaptive
// concurrency filter and Netflix's Gradient2: it measures the uncontended
// latency (minRTT) now and then by a probe that lets only MinLimit
// requests in flight (later probes, after a window within the tolerance:
// half the estimate; probes that agree are pooled), and every sample window compares the window's mean latency
// (sampleRTT) with it (r = sampleRTT/minRTT; both are the same statistic,
// so a skewed latency is no queue). By Little's law the window's requests,
// n in flight on average, are served as n/r requests at the uncontended
// latency would be: that is the concurrency the upstream really serves,
// and the rest, n×(1−1/r), waits in its queue. The limit aims at what is
// served plus a headroom (log10 of the limit, at least 1) that lets it see
// the capacity rise:
//
//   - r above 1+tolerance in two windows in a row: overload; the limit
//     goes to the served concurrency plus the headroom (never below half
//     of itself). One such window alone holds the limit: a stall of the
//     gateway (a GC pause, the CPU taken by other processes) inflates
//     every latency in flight across it just as a queue would, but is
//     over by the next window, and a cut on it starved a healthy
//     upstream for seconds while the limit grew back. If the window
//     before was such a cut too and fewer requests in flight met
//     the same latency, the latency is not a queue (a queue's wait
//     shrinks with what is let in) but a slower upstream: minRTT is
//     measured again instead.
//   - the window before above 1+tolerance×probeShare: it holds (growth
//     needs two windows under it in a row: a window of a dozen requests
//     reads low by its noise often enough to grow a limit that has its
//     queue already);
//   - a queue under half the headroom: the limit grows by the gradient
//     (1+tolerance)/r (1 to 2) plus the headroom;
//   - r under 1+tolerance×probeShare: it grows by (1+tolerance×probeShare)/r,
//     which tends to 1 as latency approaches that;
//   - otherwise (a queue of about the headroom, latency within the
//     tolerance) it holds.
//
// So it settles near capacity + headroom at small limits and a little
// above capacity (at most (1+tolerance×probeShare)×) at large ones,
// instead of where latency reaches minRTT×(1+tolerance), the fixed point
// of the plain gradient ((1+tolerance)×capacity + headroom). Within the
// tolerance it holds rather than shrinking step by step to nothing.
//
// Until a queue (latency at or above 1+tolerance×probeShare in two
// windows in a row) or drops, the limit is in slow start: while its
// requests find it full and latency stays under that it doubles, and once
// they found it full a window ends after one round trip at the new limit
// rather than at sample_window, so a healthy upstream is not held at
// initial_limit for seconds of windows. A window that did not find the
// limit full holds it and stays in slow start (whether the request that
// filled the limit is among the first to finish is chance). The first
// queue sets the limit to the served concurrency plus the headroom at once
// (it can be at most twice what served without a queue). Each
// window's new limit is averaged with the old one (smoothing), since its
// latencies come from requests admitted up to one RTT earlier. The limit
// grows only while the window's requests found it full, so an idle rule
// does not drift to max_limit. Plain Go: times are ns passed in by the
// caller.
type gradient struct {
	limit atomic.Int64 // the admission limit in force now

	mu           sync.Mutex
	cfg          AdaptiveConfig
	est          float64 // the estimated limit (kept while minRTT is measured)
	minRTT       int64
	minRTTMean   int64   // the probes' pooled mean latency (minRTT but when a window lowered it)
	minRTTErr    float64 // minRTTMean's standard error, relative to it
	minRTTN      int     // how many probe samples minRTT pools (0: none)
	fresh        bool    // the running probe replaces minRTT (a slower upstream), never pools with it
	probeAt      int64   // the running minRTT probe's limit
	sampleRTT    int64   // the last window's mean latency
	measuring    bool
	measureStart int64 // requests admitted before it do not count
	nextMeasure  int64
	epoch        int64 // requests admitted before it do not count (before the last cut, doubling or measurement)
	windowEnd    int64
	samples      []int64
	seen, drops  int
	peak         int64   // most requests in flight seen in this window
	inflightSum  int64   // the in-flight counts of this window's samples
	cutN, cutR   float64 // in flight and latency (in minRTTs) of the last window if it cut the limit, else 0
	lastR        float64 // latency (in minRTTs) of the last window, 0 if it had none
	slowStart    bool    // no queue seen yet: the limit doubles per window while full
}

func newGradient(cfg AdaptiveConfig, now int64) *gradient {
	g := &gradient{samples: make([]int64, 0, maxWindowSamples)}
	g.cfg = cfg
	g.est = float64(cfg.InitialLimit)
	g.slowStart = true
	g.startMeasure(now, false)
	return g
}

// configure applies a changed rule, keeping what was learnt.
func (g *gradient) configure(cfg AdaptiveConfig) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cfg == g.cfg {
		return
	}
	g.cfg = cfg
	g.est = math.Min(math.Max(g.est, float64(cfg.MinLimit)), float64(cfg.MaxLimit))
	if g.measuring {
		g.probeAt = min(max(g.probeAt, cfg.MinLimit), cfg.MaxLimit)
		g.limit.Store(g.probeAt)
	} else {
		g.limit.Store(int64(g.est))
	}
}

// Limit is the number of requests that may be in flight now.
func (g *gradient) Limit() int64 { return g.limit.Load() }

// probeLimit is the concurrency a minRTT probe admits: half the estimate
// when the last window's latency was within the tolerance (the estimate is
// then about what the upstream serves plus the headroom, so half of it
// meets no queue), else min_limit: for the first probe, for one started
// because the upstream looked slower, and after an overloaded window
// (the estimate may be far above what the upstream serves). At min_limit
// a probe of 25 requests took 25 / min_limit round trips (1.3 s at 200 ms
// and min_limit 4), most of a 2 s span at 0.4 C in flight.
func (g *gradient) probeLimit(fresh bool) int64 {
	if fresh || g.lastR == 0 || g.lastR > 1+g.cfg.Tolerance {
		return g.cfg.MinLimit
	}
	return min(max(g.cfg.MinLimit, int64(g.est/2)), g.cfg.MaxLimit)
}

func (g *gradient) startMeasure(now int64, fresh bool) {
	g.fresh, g.probeAt = fresh, g.probeLimit(fresh)
	g.measuring, g.measureStart = true, now
	g.samples, g.seen, g.drops, g.peak, g.inflightSum = g.samples[:0], 0, 0, 0, 0
	g.cutN, g.cutR, g.lastR = 0, 0, 0 // latencies in the old minRTT's units
	g.limit.Store(g.probeAt)
}

// observe records one finished request: admitted at start, ended at now,
// with inflight requests in flight when it was admitted; drop means it
// failed (5xx, upstream error). Client cancels are not observed at all.
func (g *gradient) observe(start, now, inflight int64, drop bool) {
	rtt := now - start
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.measuring {
		if start < g.measureStart || drop {
			return
		}
		g.samples = append(g.samples, rtt)
		if len(g.samples) >= minRTTSamples {
			g.poolMinRTT()
			g.measuring = false
			g.nextMeasure = now + g.cfg.MinRTTInterval
			g.epoch, g.windowEnd = now, now+g.cfg.SampleWindow
			g.samples, g.seen, g.drops, g.peak, g.inflightSum = g.samples[:0], 0, 0, 0, 0
			g.limit.Store(int64(g.est))
		}
		return
	}
	if start < g.epoch {
		return // admitted under the limit before the last change: it tells of that one
	}
	g.peak = max(g.peak, inflight)
	if drop {
		g.drops++
	} else {
		if len(g.samples) < maxWindowSamples {
			g.samples = append(g.samples, rtt)
		} else {
			g.samples[g.seen%maxWindowSamples] = rtt
		}
		g.seen++
		g.inflightSum += inflight
	}
	// In slow start a window ends early only once its requests found the
	// limit full: until then they say nothing of a doubled limit.
	if now >= g.windowEnd || g.slowStart && g.peak >= int64(g.est) && int64(g.seen+g.drops) >= max(int64(g.est), slowStartRound) {
		g.update(now)
	}
}

// update ends a sample window: it moves the limit, and starts a minRTT
// measurement when one is due.
func (g *gradient) update(now int64) {
	c := &g.cfg
	remeasure, cut := false, false
	binds := g.peak >= int64(g.est) // the window's requests found the limit full
	cutN, cutR := g.cutN, g.cutR    // the window before, if it cut the limit
	lastR := g.lastR                // the window before's latency, if it had one
	g.cutN, g.cutR, g.lastR = 0, 0, 0
	switch {
	case float64(g.drops) > dropShare*float64(g.drops+g.seen):
		g.est *= backoff
		g.slowStart = false
	case len(g.samples) > 0:
		g.sampleRTT = clippedMean(g.samples)
		// A window's mean is at least the uncontended latency but for
		// its noise: below minRTT by more than lowerErrs of its standard
		// errors, it shows minRTT was measured high, and that bound
		// becomes minRTT.
		if bound := float64(g.sampleRTT) * (1 + lowerErrs*relativeError(g.samples, g.sampleRTT)); g.seen >= slowStartRound && bound < float64(g.minRTT) {
			g.minRTT, g.minRTTN = int64(bound), 0
		}
		r := float64(g.sampleRTT) / float64(g.minRTT) // latency in minRTTs
		n := float64(g.inflightSum) / float64(g.seen) // in flight, on average
		served := n / r
		headroom := math.Max(1, math.Log10(g.est))
		full := g.peak >= int64(g.est) // the window's requests found the limit full
		probe, over := 1+c.Tolerance*probeShare, 1+c.Tolerance
		g.lastR = r
		next := g.est
		if g.slowStart {
			if r < probe {
				if full {
					g.est *= 2
				}
				break // not full: demand did not reach the limit; no queue either
			}
			if lastR < probe {
				break // one window can be a stall of the gateway: hold until the next confirms
			}
			// The first queue: the limit is at most twice what served
			// without one a window ago, so what the upstream serves now
			// is its capacity. Taken whole, not averaged with a limit
			// that was only a probe.
			g.slowStart = false
			if r > over {
				g.cutN, g.cutR, cut = n, r, true
				g.est = math.Max(served+headroom, g.est/2)
				break
			}
		}
		switch {
		case r > over && lastR <= over:
			// One window over the tolerance: a stall of the gateway (a GC
			// pause, the CPU taken by others) inflates every latency in
			// flight across it as a queue would. Cut only if the next
			// window confirms it; a stall is over by then.
		case r > over && cutN > 0 && n < cutN*(1-sameLatency) && math.Abs(r/cutR-1) < sameLatency:
			// The window after a cut, all of its requests admitted under
			// the new limit: fewer in flight, the same latency. A queue's
			// wait shrinks with what is let in; this latency is the
			// upstream's own (slower work, the CPU taken by others), so
			// minRTT is measured again.
			remeasure = true
		case r > over:
			next = math.Min(g.est, math.Max(served+headroom, g.est/2))
			g.cutN, g.cutR, cut = n, r, true
		case lastR >= probe:
			// Growth waits for a second window under the probe level: a
			// window of few requests (a dozen at long service times)
			// reads low by its own noise often enough to grow a limit
			// that already has its queue.
		case n-served < headroom/2 && full:
			next = g.est*math.Min(math.Max((1+c.Tolerance)/r, 1), 2) + headroom
		case r < probe && full:
			next = g.est * probe / r
		}
		g.est = g.est*(1-smoothing) + next*smoothing
	}
	g.est = math.Min(math.Max(g.est, float64(c.MinLimit)), float64(c.MaxLimit))
	if g.slowStart || cut {
		// The next window counts only requests admitted under the new
		// limit: those admitted before tell of the old one.
		g.epoch = now
	}
	g.windowEnd = now + c.SampleWindow
	g.samples, g.seen, g.drops, g.peak, g.inflightSum = g.samples[:0], 0, 0, 0, 0
	// A due probe waits while the limit does not bind: minRTT then decides
	// nothing, and a probe would refuse all but min_limit of the demand.
	if now >= g.nextMeasure && binds || remeasure {
		g.startMeasure(now, remeasure)
		return
	}
	g.limit.Store(int64(g.est))
}

// maxPooled bounds the probe samples minRTT pools: older probes tell less
// of the upstream now.
const maxPooled = 100

// poolMinRTT ends a probe: its clipped mean becomes minRTT, or, when it
// agrees with the minRTT of earlier probes within their noise (2 standard
// errors of the difference), is pooled with it weighted by samples. One
// probe of 25 samples at a coefficient of variation of 0.3 reads within
// ±12 %, and the limit follows minRTT's error one for one (a minRTT 12 %
// high lets 12 % more wait in the upstream's queue); pooled, the error
// shrinks with each probe that agrees. A probe that disagrees (the
// upstream's latency moved) or that was started because the upstream
// looked slower replaces it.
func (g *gradient) poolMinRTT() {
	m := max(clippedMean(g.samples), 1) // ns; never 0, r divides by it
	e := relativeError(g.samples, m)
	k := len(g.samples)
	if g.minRTTN > 0 && !g.fresh {
		d := math.Abs(float64(m)-float64(g.minRTTMean)) / float64(g.minRTTMean)
		if d <= 2*math.Hypot(e, g.minRTTErr) {
			n := g.minRTTN + k
			m = int64((float64(g.minRTTMean)*float64(g.minRTTN) + float64(m)*float64(k)) / float64(n))
			e *= math.Sqrt(float64(k) / float64(n))
			k = min(n, maxPooled)
		}
	}
	g.minRTTMean, g.minRTTErr, g.minRTTN, g.fresh = m, e, k, false
	g.minRTT = m
}

// AdaptiveState is the controller's state for /sluice/state.
type AdaptiveState struct {
	Limit     int64   `json:"limit"`
	Estimate  float64 `json:"estimate"`
	MinRTT    float64 `json:"min_rtt_seconds"`
	SampleRTT float64 `json:"sampled_rtt_seconds"`
	Measuring bool    `json:"measuring_min_rtt"`
}

func (g *gradient) state() AdaptiveState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return AdaptiveState{Limit: g.limit.Load(), Estimate: math.Round(g.est*100) / 100,
		MinRTT: float64(g.minRTT) / 1e9, SampleRTT: float64(g.sampleRTT) / 1e9, Measuring: g.measuring}
}

// clippedMean is the mean of s with each value taken at most 3× the median,
// so that one straggler (a stuck connection, a slow disk) moves it little
// while a queue, which delays a share of the requests by up to a few
// service times, counts in full. It sorts s in place.
func clippedMean(s []int64) int64 {
	ceil := 3 * median(s)
	var sum int64
	for _, v := range s {
		sum += min(v, ceil)
	}
	return sum / int64(len(s))
}

// relativeError is the standard error of the mean m of s (sorted, as
// clippedMean leaves it; clipped the same way), relative to m.
func relativeError(s []int64, m int64) float64 {
	if len(s) < 2 || m <= 0 {
		return 0
	}
	ceil := 3 * s[len(s)/2]
	var sq float64
	for _, v := range s {
		d := float64(min(v, ceil) - m)
		sq += d * d
	}
	return math.Sqrt(sq/float64(len(s)-1)/float64(len(s))) / float64(m)
}

// median sorts s in place and returns its middle value.
func median(s []int64) int64 {
	slices.Sort(s)
	return s[len(s)/2]
}
