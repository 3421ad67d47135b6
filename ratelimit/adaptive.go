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
// make one minRTT measurement (their mean, each at most clipMedians times
// the median: clippedMean); a probe at a higher concurrency takes
// probeRounds round trips of it.
const minRTTSamples = 25

// probeRounds: a probe's samples are its first answers, and the first
// answers of requests in flight together are the fast ones (a request
// admitted later overtakes a slow one admitted before it). Over one round
// trip that truncates the slow tail: a probe of 25 at 27 in flight read
// 14 % low in front of a healthy 23 ms service, and probes at 200 ms read
// 2 % low on average. Over 4 round trips only the last is truncated: the
// bias is a quarter of it, and the samples pooled per probe are more.
const probeRounds = 4

// slowStartJump bounds how far one round trip of slow start may take the
// limit: to twice what was asked of it (the requests in flight plus those
// it refused; twice, since refusals counted before every client came back
// undercount the demand), at least double and at most this many times
// itself. Doubling per round trip refused most of a demand far above
// initial_limit for several round trips (60 clients, initial_limit 8: 8,
// 16, 32, 64); the demand is met in one.
const slowStartJump = 8

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

// clipMedians: a latency counts at most this many times its sample's
// median (clippedMean). A stall of the gateway delays the answers in flight
// across it by tens of milliseconds, several service times at 20 ms: at 3
// medians such samples counted nearly in full, and a probe that met one
// read minRTT up to 1.24 × the service time, which let 1.3-1.45 C wait
// after the capacity halved. A queue delays a request in proportion to the
// median, so it still counts.
const clipMedians = 2

// growErrs: growth by the gradient plus the headroom (the window showed
// no queue) needs the window's latency under the probe share even this
// many of its standard errors above its mean. A window of a dozen
// requests (a standard error of about 9 %) in front of a queue of one
// request read no queue often enough that at C = 5 the limit jumped from
// 6 to 8 every few seconds; the gentle growth (probe share / r) stays for
// windows that read low by their noise alone.
const growErrs = 2

// trialShare: a raise on trial (trial) is undone by a window whose latency
// is above this share of the tolerance over minRTT, not only above the
// tolerance. At C = 10 a raise to 13 reads 1.3 minRTT; a minRTT 4 % high
// put that under the tolerance, and 1.3 C held. A limit whose latency sits
// in the upper quarter of the tolerance has more queue than the headroom
// that growth aims at, so a raise into it is taken back.
const trialShare = 0.75

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
// finished: one round trip at the new limit, so the limit grows per round
// trip as TCP's slow start does, not per window. Nor does sample_window
// end a slow-start window of fewer answers: after a jump into a queue
// the answers of requests admitted under the new limit come back one by
// one behind the queue, and under open-loop demand (a flash sale at 3×
// the capacity) windows of one answer took a queue for a stall, then one
// answer read with its noise alone for no queue, and jumped the limit to
// 128 for 10 workers (TestAdaptiveSimFlashSale).
const slowStartRound = 10

// sameLatency: when a cut is followed by a window with more than this share
// fewer requests in flight (more than a window's noise) and latency within
// this share of the cut window's, the latency is not a queue (a queue
// shrinks with what is let in, and so does its wait) but a slower
// upstream, and minRTT is measured again.
const sameLatency = 0.125

// gradient is one rule's adaptive in-flight limit, after Envoy's adaptive
// concurrency filter and Netflix's Gradient2: it measures the uncontended
// latency (minRTT) first from the requests a fresh instance admits at
// InitialLimit, then now and then by a probe that lets fewer requests in
// flight than met no queue (probeLimit: 3/4 of what the last window
// served; MinLimit in slow start) for 4 round trips (probeRounds; probes
// that agree are pooled, and come every 10 windows while minRTT is
// uncertain),
// and every sample window compares the window's mean latency (sampleRTT)
// with it (r = sampleRTT/minRTT; both are the same statistic,
// so a skewed latency is no queue). By Little's law the window's requests,
// n in flight on average, are served as n/r requests at the uncontended
// latency would be: that is the concurrency the upstream really serves,
// and the rest, n×(1−1/r), waits in its queue. The limit aims at what is
// served plus a headroom (log10 of the limit, at least 1) that lets it see
// the capacity rise:
//
//   - a raise of the whole limit on trial (trial) met latency above
//     1+tolerance×trialShare: it is undone at once (no confirmation);
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
//   - a queue under half the headroom, and latency under the probe share
//     even growErrs standard errors above the window's mean: the limit
//     grows by the gradient (1+tolerance)/r (1 to 2) plus the headroom;
//   - r under 1+tolerance×probeShare: it grows by (1+tolerance×probeShare)/r,
//     which tends to 1 as latency approaches that;
//   - otherwise (a queue of about the headroom, latency within the
//     tolerance) it holds; held full for a few windows of many requests,
//     it tries a raise that the window after judges (explore: a raise
//     that latency does not follow means minRTT was read low).
//
// So it settles near capacity + headroom at small limits and a little
// above capacity (at most (1+tolerance×probeShare)×) at large ones,
// instead of where latency reaches minRTT×(1+tolerance), the fixed point
// of the plain gradient ((1+tolerance)×capacity + headroom). Within the
// tolerance it holds rather than shrinking step by step to nothing.
//
// Until a queue (latency at or above 1+tolerance×probeShare in two
// windows in a row) or drops, the limit is in slow start: while its
// requests find it full and latency stays under that it grows to twice
// the demand it met (in flight plus refused; at least double, at most
// slowStartJump times), and once
// they found it full a window ends after one round trip at the new limit
// rather than at sample_window, so a healthy upstream is not held at
// initial_limit for seconds of windows. A window that did not find the
// limit full holds it and stays in slow start (whether the request that
// filled the limit is among the first to finish is chance). The first
// queue sets the limit to the served concurrency plus the headroom at once,
// not below the last limit that served without a queue. Each
// window's new limit is averaged with the old one (smoothing), since its
// latencies come from requests admitted up to one RTT earlier. The limit
// grows only while the window's requests found it full, so an idle rule
// does not drift to max_limit. Plain Go: times are ns passed in by the
// caller.
type gradient struct {
	limit   atomic.Int64 // the admission limit in force now
	refused atomic.Int64 // requests refused since the last window ended

	// The first round trip (adaptive_firstround.go): firstRound is closed
	// at slow start's first step; until then up to maxWaiters requests
	// over the limit wait for it.
	firstRound chan struct{}
	waiters    atomic.Int64
	maxWaiters int64

	mu           sync.Mutex
	cfg          AdaptiveConfig
	est          float64 // the estimated limit (kept while minRTT is measured)
	minRTT       int64
	minRTTMean   int64   // the probes' pooled mean latency (minRTT but when a window lowered it)
	minRTTErr    float64 // minRTTMean's standard error, relative to it
	minRTTN      int     // how many probe samples minRTT pools (0: none)
	probeAt      int64   // the running minRTT probe's limit
	probeSamples int     // how many samples end the running probe
	firstAnswer  int64   // the first probe: when its first request was answered (0: not yet)
	jumped       bool    // the first probe: slow start took its first step
	clearEst     float64 // in slow start, the last limit whose window showed no queue (0: none yet)
	sampleRTT    int64   // the last window's mean latency
	measuring    bool
	measureStart int64 // requests admitted before it do not count
	nextMeasure  int64
	earlyProbe   bool         // the next probe comes early to narrow minRTT (narrowErr)
	higher       probeReading // the last early probe, if it read higher than minRTT (poolMinRTT)
	narrowing    bool         // the running probe is such an early one
	epoch        int64        // requests admitted before it do not count (before the last cut, doubling or measurement)
	windowEnd    int64
	samples      []int64
	seen, drops  int
	peak         int64   // most requests in flight seen in this window
	inflightSum  int64   // the in-flight counts of this window's samples
	raisedFrom   int64   // the limit before the last raise while that raise is on trial (0: none)
	trialPassed  int     // windows under the probe share since that raise
	cutN, cutR   float64 // in flight and latency (in minRTTs) of the last window if it cut the limit, else 0
	lastR        float64 // latency (in minRTTs) of the last window, 0 if it had none
	lastServed   float64 // the concurrency the last window's upstream served (n/r)
	lastSeen     int     // the answers the last window had
	slowStart    bool    // no queue seen yet: the limit grows per round trip while full
	deferredN    float64 // a re-measurement's window: in flight (0: none) and latency, for the cut it deferred
	deferredRTT  int64
	explore      explore // tries of a raise while held (adaptive_explore.go)
}

func newGradient(cfg AdaptiveConfig, now int64) *gradient {
	g := &gradient{samples: make([]int64, 0, maxWindowSamples)}
	g.cfg = cfg
	g.est = float64(cfg.InitialLimit)
	g.slowStart = true
	g.startMeasure(now)
	// The first minRTT is measured at initial_limit, refusing no more
	// than it: the requests in flight are the first this process sends,
	// and initial_limit is taken to be within what the upstream serves,
	// so they meet no queue of ours. A probe at min_limit refused all but
	// min_limit of the demand for 25 / min_limit round trips. Only the
	// requests admitted before the first answer count, all of them:
	// those admitted later and answered among the first are the fast
	// ones (minRTT read 7-10 % low). A limit's worth of samples is few,
	// so slow start's first window is pooled with it (update).
	g.probeAt = max(cfg.InitialLimit, 1)
	g.probeSamples = int(min(g.probeAt, minRTTSamples))
	g.limit.Store(g.probeAt)
	g.firstRound = make(chan struct{})
	g.maxWaiters = min(slowStartJump*g.probeAt, max(cfg.MaxLimit, g.probeAt)) - g.probeAt
	return g
}

// refuse records one request refused at the limit: in slow start, demand
// beyond the limit that a window without a queue may take the limit to.
func (g *gradient) refuse() { g.refused.Add(1) }

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

// probeLimit is the concurrency a minRTT probe admits. Once minRTT pools
// at least a probe's worth of samples, probeServed of what the last
// window's upstream served (n/r: the concurrency that met no queue), if
// that window had slowStartRound answers or more (one answer read 0.76
// minRTT, n/r said 21 were served at C = 10, and a probe at 15 met a queue
// and took minRTT 56 % high); after
// an overloaded window at most half the estimate too, since the capacity
// may still be falling (the flash sale at C 10 → 5: a window over the
// step served 8 by its earlier requests, and a probe at 6 met the new
// queue and replaced minRTT with it). Before minRTT pools that much it
// may be far off, and so may n/r (a first minRTT pooled with a queued
// slow-start window read high, and n/r overstated what the upstream
// serves): half the estimate after a window within the tolerance (the
// estimate is then about what the upstream serves plus the headroom), half
// of what an overloaded window served. In slow start (the estimate is up
// to twice the demand, not what the upstream serves) and before any
// window, min_limit.
func (g *gradient) probeLimit() int64 {
	over := g.lastR > 1+g.cfg.Tolerance
	trusted := g.minRTTN >= minRTTSamples && g.lastSeen >= slowStartRound
	var at float64
	switch {
	case g.slowStart || g.lastR == 0:
		return g.cfg.MinLimit
	case trusted && over:
		at = math.Min(probeServed*g.lastServed, g.est/2)
	case trusted:
		at = probeServed * g.lastServed
	case over:
		at = g.lastServed / 2
	default:
		at = g.est / 2
	}
	return min(max(g.cfg.MinLimit, int64(at)), g.cfg.MaxLimit)
}

// probeServed: a probe admits this share of what the upstream served. A
// probe of 25 requests took 25 / its concurrency round trips: at half the
// estimate or min_limit 1.5 s at 200 ms and C = 10, and a 2 s span after a
// capacity halving read 0.5-0.7 C in flight in 11 of 180 seeds (200 ms,
// C 20 → 10). At 3/4 of n/r it takes probeRounds round trips and still
// meets no queue: n/r is what was served without one, within minRTT's
// error (pooled from a probe or more) and the window's.
const probeServed = 0.75

func (g *gradient) startMeasure(now int64) {
	if g.explore.from > 0 { // a raise not yet judged is undone
		g.est = math.Min(g.est, float64(g.explore.from))
	}
	g.explore.reset()
	g.probeAt = g.probeLimit()
	g.probeSamples = int(min(max(minRTTSamples, probeRounds*g.probeAt), maxWindowSamples))
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
		g.peak = max(g.peak, inflight)
		if g.minRTTN == 0 && g.minRTT == 0 { // the first probe
			if g.firstAnswer == 0 {
				g.firstAnswer = now
			}
			if start < g.firstAnswer {
				g.samples = append(g.samples, rtt)
			}
			if !g.jumped && 2*len(g.samples) >= g.probeSamples {
				// Half of the first requests are answered: slow
				// start's first round trip, at a limit taken to be
				// within what the upstream serves (its latency is
				// minRTT by definition). Waiting for the slowest of
				// them refused the demand beyond it for half a round
				// trip more.
				g.jumped = true
				if refused := g.refused.Swap(0); refused > 0 || g.peak >= g.probeAt {
					g.est = float64(g.probeAt)
					g.peak = max(g.peak, g.probeAt) // it refused: it was full
					g.slowStartGrow(refused)
					g.est = math.Min(math.Max(g.est, float64(g.cfg.MinLimit)), float64(g.cfg.MaxLimit))
					g.limit.Store(int64(g.est))
				}
				g.endFirstRound()
			}
			// All of the first requests answered, or (some were
			// cancelled and never will be) four times as long as the
			// first took.
			if len(g.samples) >= g.probeSamples || len(g.samples) > 0 && now-g.measureStart >= 4*(g.firstAnswer-g.measureStart) {
				g.endMeasure(now)
			}
			return
		}
		g.samples = append(g.samples, rtt)
		if len(g.samples) >= g.probeSamples {
			g.endMeasure(now)
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
	answers := int64(g.seen + g.drops)
	if now >= g.windowEnd && (!g.slowStart || answers >= slowStartRound) ||
		g.slowStart && g.peak >= int64(g.est) && answers >= max(int64(g.est), slowStartRound) {
		g.update(now)
	}
}

// endMeasure ends a minRTT probe and restores the estimated limit.
func (g *gradient) endMeasure(now int64) {
	// A first minRTT of fewer samples than a probe's is measured again
	// soon (at half the estimate, once the limit binds within the
	// tolerance): where min_rtt_interval is long it was kept, with its
	// ± 11 %, for all that time. So is one whose standard error is still
	// above narrowErr (earlyProbe).
	few := len(g.samples) < minRTTSamples
	g.poolMinRTT()
	g.applyDeferredCut()
	g.measuring = false
	g.nextMeasure = now + g.cfg.MinRTTInterval
	g.earlyProbe = !few && g.minRTTN < maxPooled && g.minRTTErr > narrowErr*g.cfg.Tolerance
	if few || g.earlyProbe {
		g.nextMeasure = now + min(g.cfg.MinRTTInterval, 10*g.cfg.SampleWindow)
	}
	g.epoch, g.windowEnd = now, now+g.cfg.SampleWindow
	g.refused.Store(0)
	g.samples, g.seen, g.drops, g.peak, g.inflightSum = g.samples[:0], 0, 0, 0, 0
	g.limit.Store(int64(g.est))
	g.endFirstRound()
}

// applyDeferredCut ends a re-measurement started because latency looked
// like the upstream's own (update, sameLatency): if the window that
// started it was over the tolerance by the new minRTT too, it was a queue
// (after a capacity halving, one still draining), and the cut it deferred
// is made now. Restoring the estimate whole kept 2.2 C in flight for
// seconds after the probe (examples/protect-downstream, C = 5: the limit
// 11 before and after a probe that read minRTT 200.7 → 200.9 ms).
func (g *gradient) applyDeferredCut() {
	n, rtt := g.deferredN, g.deferredRTT
	g.deferredN, g.deferredRTT = 0, 0
	if n == 0 {
		return
	}
	if r := float64(rtt) / float64(g.minRTT); r > 1+g.cfg.Tolerance {
		g.est = g.cutTo(n / r)
	}
}

// cutTo is the estimate after a queue: what the upstream served plus the
// headroom, never above the estimate nor below half of it.
func (g *gradient) cutTo(served float64) float64 {
	headroom := math.Max(1, math.Log10(g.est))
	return math.Min(g.est, math.Max(served+headroom, g.est/2))
}

// slowStartGrow takes the limit, full in a round trip without a queue, to
// the demand it met (in flight plus refused), at least twice and at most
// slowStartJump times itself.
func (g *gradient) slowStartGrow(refused int64) {
	g.clearEst = g.est
	demand := 2 * float64(g.peak+refused)
	g.est = math.Max(2*g.est, math.Min(demand, slowStartJump*g.est))
}

// update ends a sample window: it moves the limit, and starts a minRTT
// measurement when one is due.
func (g *gradient) update(now int64) {
	c := &g.cfg
	remeasure, measureNow, cut, explored := false, false, false, false
	pooledOver := false             // a slow-start window over the probe share, pooled into minRTT
	before := int64(g.est)          // the limit in force in this window
	binds := g.peak >= int64(g.est) // the window's requests found the limit full
	cutN, cutR := g.cutN, g.cutR    // the window before, if it cut the limit
	lastR := g.lastR                // the window before's latency, if it had one
	g.cutN, g.cutR, g.lastR = 0, 0, 0
	refused := g.refused.Swap(0)
	switch {
	case float64(g.drops) > dropShare*float64(g.drops+g.seen):
		g.est *= backoff
		g.slowStart = false
	case len(g.samples) > 0:
		g.sampleRTT = clippedMean(g.samples)
		se := relativeError(g.samples, g.sampleRTT) // its standard error, relative to it
		if g.slowStart && g.seen >= slowStartRound && g.minRTTN < minRTTSamples {
			// Until minRTT has a probe's worth of samples, a slow-start
			// window that slow start takes for no queue (under the
			// probe share above minRTT), or that agrees with minRTT
			// within 2 standard errors of the difference, is pooled
			// with it: the first minRTT is a limit's worth of samples
			// (8: ± 11 %), and one read low made latency without a
			// queue look like one and ended slow start on it. Under
			// fewFirstSamples, 3 standard errors: 2 of 8 samples and a
			// window are about 23 %, and a first minRTT 20 % low (5
			// seeds of 400 in the simulation) left the window out.
			errs := 2.0
			if g.minRTTN < fewFirstSamples {
				// And against the spread the two share if that is
				// wider: the spread of so few samples is a guess too.
				errs = 3 * math.Max(1, sharedSpreadErr(se, len(g.samples), g.minRTTErr, g.minRTTN)/math.Hypot(se, g.minRTTErr))
			}
			if float64(g.sampleRTT) < float64(g.minRTT)*(1+g.cfg.Tolerance*probeShare) {
				errs = math.Inf(1)
			} else {
				pooledOver = true
			}
			g.pool(g.sampleRTT, se, len(g.samples), errs, false)
		}
		// A window's mean is at least the uncontended latency but for
		// its noise: below minRTT by more than lowerErrs of its standard
		// errors, it shows minRTT was measured high, and that bound
		// becomes minRTT.
		if bound := float64(g.sampleRTT) * (1 + lowerErrs*se); g.seen >= slowStartRound && bound < float64(g.minRTT) {
			g.minRTT, g.minRTTN = int64(bound), 0
		}
		r := float64(g.sampleRTT) / float64(g.minRTT) // latency in minRTTs
		n := float64(g.inflightSum) / float64(g.seen) // in flight, on average
		served := n / r
		headroom := math.Max(1, math.Log10(g.est))
		full := g.peak >= int64(g.est) // the window's requests found the limit full
		probe, over := 1+c.Tolerance*probeShare, 1+c.Tolerance
		g.lastR, g.lastServed, g.lastSeen = r, served, g.seen
		next := g.est
		if g.slowStart {
			if r < probe {
				// A jump needs a round trip at the limit (the first
				// answers after a change are of the requests admitted
				// first, which met no queue: at C = 10 the first 10 of a
				// limit of 16) read under the probe share by the minRTT
				// it was measured against: a window over it that agreed
				// with a first minRTT of 8 samples within their noise
				// raised minRTT towards the queue when pooled, and read
				// no queue after. Else it holds and stays in slow start.
				if full && !pooledOver && int64(g.seen+g.drops) >= int64(g.est) {
					g.slowStartGrow(refused)
				}
				break // not full: demand did not reach the limit; no queue either
			}
			if lastR < probe {
				// One window can be a stall of the gateway: the next
				// confirms. Over the tolerance after a jump beyond
				// doubling, the limit goes back to twice what served
				// without a queue meanwhile: the jump's queue, if it is
				// one, grows with every round trip it is held.
				if g.clearEst > 0 && r > over {
					g.est = math.Min(g.est, 2*g.clearEst)
				}
				break
			}
			// The first queue: the limit is at most twice what served
			// without one a window ago, so what the upstream serves now
			// is its capacity. Taken whole, not averaged with a limit
			// that was only a probe.
			g.slowStart = false
			if r > over {
				g.cutN, g.cutR, cut = n, r, true
				floor := g.est / 2 // at most twice what served without a queue
				if g.clearEst > 0 {
					floor = min(floor, g.clearEst) // after a jump, what served without one
				}
				g.est = math.Max(served+headroom, floor)
				break
			}
		}
		if g.explore.from > 0 {
			// The window after an exploring raise judges it.
			if queue, from := g.explore.judge(g.sampleRTT, n, len(g.samples)); queue {
				g.est, cut = math.Min(g.est, float64(from)), true
			} else {
				measureNow = true // no queue: minRTT was read low
			}
			break
		}
		switch {
		case r > 1+c.Tolerance*trialShare && g.raisedFrom > 0:
			// A raise on trial met a queue: it is undone at once, no
			// confirmation. A stall of the gateway would at worst undo
			// a raise, never cut below the limit that held before it;
			// waiting for a second window kept a limit of 1.4 C for
			// seconds at C = 5.
			g.est = math.Min(g.est, math.Max(served+headroom, float64(g.raisedFrom)))
			next = g.est
			g.cutN, g.cutR, cut = n, r, true
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
			// minRTT is measured again. If minRTT stays, the latency was
			// a queue after all, and the probe's end cuts (endMeasure).
			remeasure = true
			g.deferredN, g.deferredRTT = n, g.sampleRTT
		case r > over:
			next = g.cutTo(served)
			g.cutN, g.cutR, cut = n, r, true
		case int64(g.seen) < min(slowStartRound, int64(g.est)):
			// Nor does a window of fewer answers than that grow it: in
			// the flash sale at C = 5 windows of 2 answers read 0.7
			// minRTT and took the limit from 6 to 12 in two windows.
		case lastR >= probe:
			// Growth waits for a second window under the probe level: a
			// window of few requests (a dozen at long service times)
			// reads low by its own noise often enough to grow a limit
			// that already has its queue.
		case n-served < headroom/2 && full && r*(1+growErrs*se) < probe:
			next = g.est*math.Min(math.Max((1+c.Tolerance)/r, 1), 2) + headroom
		case r < probe && full:
			next = g.est * probe / r
		}
		if next == g.est && !cut && full && refused > 0 && r >= probe && r <= over {
			// Held full within the tolerance: now and then a raise is
			// tried (adaptive_explore.go).
			if raised := g.explore.tryRaise(g.est, g.sampleRTT, n, len(g.samples), probe); raised > 0 {
				g.est, explored = raised, true
				break
			}
		} else {
			g.explore.held = 0
		}
		g.est = g.est*(1-smoothing) + next*smoothing
	}
	g.est = math.Min(math.Max(g.est, float64(c.MinLimit)), float64(c.MaxLimit))
	g.trial(before, cut)
	if explored {
		g.raisedFrom = 0 // judged by explore, not on trial
	}
	if int64(g.est) != before || cut {
		// The next window counts only requests admitted under the new
		// limit: those admitted before tell of the old one. A limit
		// held keeps them: after a jump into a queue, requests admitted
		// later come back only once the queue ahead of them drained.
		g.epoch = now
	}
	g.windowEnd = now + c.SampleWindow
	g.samples, g.seen, g.drops, g.peak, g.inflightSum = g.samples[:0], 0, 0, 0, 0
	// A due probe waits while the limit does not bind: minRTT then decides
	// nothing, and a probe would refuse all but min_limit of the demand. An
	// early one (narrowErr) also waits for a window within the tolerance,
	// so that it runs at half the estimate, not at what an overloaded
	// window served.
	due := now >= g.nextMeasure && binds && (!g.earlyProbe || g.lastR > 0 && g.lastR <= 1+c.Tolerance)
	if due || remeasure || measureNow {
		g.startMeasure(now)
		g.narrowing = due && g.earlyProbe && !remeasure && !measureNow
		return
	}
	g.limit.Store(int64(g.est))
}

// trial keeps a raise of the whole limit (outside slow start) on trial:
// from the window after it, latency over trialShare of the tolerance
// undoes it (update), never to more than the limit in force, until
// trialWindows windows at the raised limit read under the probe share. At
// a small capacity one request more is a large share of it (at C = 5, 7 in
// flight are 1.4 C against 6's 1.2 C), and a raise that noise made (a
// window of a dozen requests reads 1.2 minRTT as 1.1 often enough) was
// kept until two windows in a row confirmed the queue, half of a 2 s span.
func (g *gradient) trial(before int64, cut bool) {
	switch {
	case g.slowStart || cut:
		g.raisedFrom = 0
	case int64(g.est) > before:
		g.raisedFrom, g.trialPassed = before, 0
	case int64(g.est) < before:
		g.raisedFrom = 0
	case g.lastR < 1+g.cfg.Tolerance*probeShare:
		// No queue at the raised limit: it passes after trialWindows
		// such windows.
		if g.trialPassed++; g.trialPassed >= trialWindows {
			g.raisedFrom = 0
		}
	}
}

// trialWindows: a raise on trial passes after this many windows under the
// probe share. The first window after a raise holds requests that met the
// queue of the limit before it; with one, a window that read 1.09 minRTT
// (its dozen answers' noise) passed a raise from 6 to 7 at C = 5, and the
// limit went between 6 and 7 for the rest of the run: 1.3-1.4 C in 15 of
// 180 seeds (200 ms, C 10 → 5).
const trialWindows = 2

// narrowErr: while minRTT's standard error is above this share of the
// tolerance (3 % at the default 0.25) and it pools fewer than maxPooled
// samples, the next probe comes after 10 sample windows, not after
// min_rtt_interval. The limit follows minRTT's error one for one, and a
// first minRTT of 8 samples and one probe of 25 (± 5 % at a coefficient of
// variation of 0.3) read 13 % high often enough that at C = 5 a limit of 7
// (1.4 C) read as within the tolerance and held until the next probe 30 s
// on; after three more probes minRTT is within about ± 3 %.
const narrowErr = 1.0 / 8

// fewFirstSamples: a first minRTT of fewer samples (initial_limit under
// it) is pooled with slow start's windows within 3 standard errors of the
// difference, not 2, and of the wider of the two estimates of it
// (sharedSpreadErr; update).
const fewFirstSamples = 10

// sharedSpreadErr is the standard error of the difference of two mean
// latencies (relative standard errors e1 and e2, of n1 and n2 samples) as
// Student's pooled-variance test has it: under the hypothesis tested, the
// same latency distribution, the two share their coefficient of variation,
// estimated from both. The first minRTT's own spread, of 8 samples, is a
// guess: 8 latencies at a coefficient of variation of 0.3 lay close
// together and read 20 % low at once (a standard error of 6 % for the
// service's 10.6 %), slow start's first window at the true latency was left
// out as a queue, and a healthy 200 ms upstream had 10-17 % of its requests
// refused in 3 seeds of 1,180 (TestGradientFirstMinRTTOfCloseSamplesPoolsWithSlowStart).
func sharedSpreadErr(e1 float64, n1 int, e2 float64, n2 int) float64 {
	if n1+n2 <= 2 {
		return math.Hypot(e1, e2)
	}
	f1, f2 := float64(n1), float64(n2)
	cv2 := ((f1-1)*e1*e1*f1 + (f2-1)*e2*e2*f2) / (f1 + f2 - 2) // e×√n is a sample's coefficient of variation
	return math.Sqrt(cv2 * (1/f1 + 1/f2))
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
// upstream's latency moved) replaces it. So does one started because the
// upstream looked slower, but only when it disagrees: after a capacity
// halving that latency was mostly the queue still draining, and a probe
// that always replaced swapped minRTT's ± 3 % for its own ± 6 % (in the
// simulation, 13 % high: a limit of 1.4 C held for 20 s at C = 5). An
// early probe (narrowErr) replaces it only when lower: it comes every few
// seconds, so it may run into a capacity that just halved (a flash sale
// at C 10 → 5: a probe at half the estimate met the new queue, replaced
// minRTT with it and restored a limit of 2 C); a latency that really rose
// is taken by the next probe on min_rtt_interval or by a re-measurement.
// Over the tolerance, it cuts the limit: in the flash sale a probe at 7
// met C = 5 and the estimate of 14 it restored held 1.8 C for 2 s.
func (g *gradient) poolMinRTT() {
	m := max(clippedMean(g.samples), 1) // ns; never 0, r divides by it
	replace := !g.narrowing || m < g.minRTT
	if g.narrowing {
		// Against the minRTT in force: after a window lowered it
		// (lowerErrs), the probes' pooled mean is older and higher, and
		// a probe that met the flash sale's new queue (1.3 minRTT) read
		// within the tolerance of that mean, cut nothing and left a
		// limit of 2.4 C.
		if r := float64(m) / float64(g.minRTT); r > 1+g.cfg.Tolerance {
			// At half the estimate it met a queue: the capacity fell
			// under that. The limit goes to what the probe's requests
			// were served at, as a window's cut would.
			g.est = g.cutTo(float64(g.probeAt) / r)
		}
	}
	e, k := relativeError(g.samples, m), len(g.samples)
	if g.narrowing && m > g.minRTT {
		// An early probe that reads higher is left out alone, but after
		// two in a row that agree with each other the lower of them
		// replaces minRTT: a minRTT read 13 % low held a limit of 4
		// after the capacity doubled from 5 to 10 (at 4 and 5 in flight
		// latency read 1.0-1.3 minRTT), while four early probes in 20 s
		// read 1.16-1.31 minRTT and were each left out. The lower, since
		// the first may have met a capacity that just fell (a queue only
		// raises latency): pooled, a probe that met C 10 → 5 and the
		// next made minRTT 15 % high, and 7 in flight (1.4 C) read
		// within the tolerance.
		h := g.higher
		g.higher = probeReading{m, e, k}
		if h.n > 0 && math.Abs(float64(m-h.mean))/float64(h.mean) <= 2*math.Hypot(e, h.err) {
			if h.mean < m {
				m, e, k = h.mean, h.err, h.n
			}
			replace, g.higher = true, probeReading{}
		}
	} else {
		g.higher = probeReading{}
	}
	g.narrowing = false
	g.pool(m, e, k, 2, replace)
}

// probeReading is one probe's clipped mean latency, its relative standard
// error and its number of samples.
type probeReading struct {
	mean int64
	err  float64
	n    int
}

// pool takes a mean latency m of k samples, with relative standard error
// e, into minRTT when it agrees with it; one that disagrees replaces it if
// replace, else is left out.
func (g *gradient) pool(m int64, e float64, k int, errs float64, replace bool) {
	if g.minRTTN > 0 {
		d := math.Abs(float64(m)-float64(g.minRTTMean)) / float64(g.minRTTMean)
		if d <= errs*math.Hypot(e, g.minRTTErr) {
			n := g.minRTTN + k
			m = int64((float64(g.minRTTMean)*float64(g.minRTTN) + float64(m)*float64(k)) / float64(n))
			e *= math.Sqrt(float64(k) / float64(n))
			k = min(n, maxPooled)
		} else if !replace {
			return
		}
	} else if !replace {
		return
	}
	g.minRTTMean, g.minRTTErr, g.minRTTN = m, e, k
	g.minRTT = m
}

// AdaptiveState is the controller's state for /sluice/state.
type AdaptiveState struct {
	Limit     int64   `json:"limit"`
	Estimate  float64 `json:"estimate"`
	MinRTT    float64 `json:"min_rtt_seconds"`
	SampleRTT float64 `json:"sampled_rtt_seconds"`
	Measuring bool    `json:"measuring_min_rtt"`
	// Waiting: requests that found a fresh limit full and wait for its
	// first step (at most one sample window) instead of being refused.
	Waiting int64 `json:"waiting_first_step"`
}

func (g *gradient) state() AdaptiveState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return AdaptiveState{Limit: g.limit.Load(), Estimate: math.Round(g.est*100) / 100,
		MinRTT: float64(g.minRTT) / 1e9, SampleRTT: float64(g.sampleRTT) / 1e9, Measuring: g.measuring,
		Waiting: g.waiters.Load()}
}

// clippedMean is the mean of s with each value taken at most clipMedians
// times the median, so that one straggler (a stuck connection, a slow disk,
// a stall of the gateway) moves it little while a queue, which delays the
// requests in proportion to the median, counts. It sorts s in place.
func clippedMean(s []int64) int64 {
	ceil := clipMedians * median(s)
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
	ceil := clipMedians * s[len(s)/2]
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
