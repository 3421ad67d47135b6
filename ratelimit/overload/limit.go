package overload

import (
	"math"
	"slices"
	"sync/atomic"
)

// Config is a controller's settings; times are ns.
type Config struct {
	// MinLimit and MaxLimit bound the limit; InitialLimit is where it
	// starts.
	MinLimit, MaxLimit, InitialLimit int64
	// Tolerance is the share by which a window's latency may exceed
	// minRTT before the limit shrinks.
	Tolerance float64
	// SampleWindow is how often the limit moves; MinRTTInterval how often
	// minRTT is measured again.
	SampleWindow, MinRTTInterval int64
	// MaxQueueWait is the longest a request waits for a slot; MaxQueued
	// how many may wait at once.
	MaxQueueWait, MaxQueued int64
}

const (
	// probeSamples is how many answers, admitted during a probe, make one
	// minRTT measurement (their clipped mean, as a window's).
	probeSamples = 50
	// windowSamples is the fewest answers a window needs to move the
	// limit, besides two per request the limit admits (two round trips:
	// a slow service's window spans several sample_windows rather than
	// judging a dozen answers); a window with fewer stays open.
	windowSamples = 10
	// ringSize bounds the latencies kept per window (the newest win).
	ringSize = 256
	// dropShare: a window in which more than this share of answers failed
	// (5xx, upstream error) shrinks the limit by backoff whatever the
	// latency: an upstream failing fast is not a healthy one.
	dropShare = 0.05
	backoff   = 0.9
)

// limit is the in-flight limit and its measurements. Answers are recorded
// without a lock (record); the rest runs under the controller's lock.
//
// Phases: a probe admits probeLimit (¾ of the limit, at least min_limit)
// until probeSamples answers of requests it admitted are back after its
// first round, and takes their clipped mean as minRTT; then the limit goes back to where it was, and
// every sample window with windowSamples answers moves it:
//
//	limit ← limit × clamp(minRTT×(1+tolerance) / latency, ½, 2) + 1
//
// where a latency is the mean of the answers, each counted at most twice
// the median (clippedMean): a queue in front of a pool of workers delays
// only the requests beyond the workers, fewer than half at times, which a
// median does not see; a stall of the gateway delays a few answers by
// many service times, which a plain mean takes for a queue.
//
// It grows only in a window in which the limit was full (demand to fill
// it), so an idle rule does not drift to max_limit. A new probe starts
// min_rtt_interval after the last one ended, or after the next window
// when the last found minRTT lower by more than the tolerance (the first
// probe always): under overload, ¾ of a limit that is too high still
// queues, so the limit comes down in a few probes, not one per interval.
type limit struct {
	cfg Config
	est float64 // the limit outside probes

	// epoch counts phases; a request carries the epoch it was admitted in
	// and only an answer of the current phase is a sample of it.
	epoch     atomic.Uint32
	probing   bool
	minRTT    int64
	nextProbe int64
	winStart  int64
	full      bool // the limit was full in this window
	again     bool // probe again after the next window
	chained   bool // this probe follows one that found a lower minRTT
	lastRTT   int64

	n, drops atomic.Int64 // answers and failures recorded this phase or window
	// What due reads without the lock: answers needed, and when the
	// window and the next probe are due.
	needN, windowDue, probeDue atomic.Int64
	ring                       [ringSize]atomic.Int64
	scratch                    []int64
}

func (l *limit) init(cfg Config, now int64) {
	l.cfg = cfg
	l.est = float64(cfg.InitialLimit)
	l.startProbe(now)
}

// current is the limit in force.
func (l *limit) current() int64 {
	if l.probing {
		return l.probeLimit()
	}
	return int64(l.est)
}

func (l *limit) probeLimit() int64 {
	return min(max(l.cfg.MinLimit, int64(l.est*3/4)), l.cfg.MaxLimit)
}

// record keeps one answer of a request admitted in epoch: its latency and
// whether it failed. Lock-free; safe beside everything else.
func (l *limit) record(epoch uint32, latency int64, drop bool) {
	if epoch != l.epoch.Load() {
		return
	}
	i := l.n.Add(1) - 1
	if drop {
		l.drops.Add(1)
		latency = 0 // not a latency sample (clippedMean skips it)
	}
	l.ring[i%ringSize].Store(latency)
}

// due reports whether step has something to do at now (read without the
// lock, so a request pays for the lock only when it does).
func (l *limit) due(now int64) bool {
	return now >= l.windowDue.Load() && l.n.Load() >= l.needN.Load() || now >= l.probeDue.Load()
}

// step ends a probe or a window that is due; it reports whether the limit
// changed.
func (l *limit) step(now int64) bool {
	before := l.current()
	switch {
	case l.probing:
		if l.n.Load() < l.needN.Load() {
			return false
		}
		l.probing = false
		l.nextProbe = now + l.cfg.MinRTTInterval
		if m := l.clippedMean(probeSamples); m > 0 {
			// A probe at ¾ of a limit above what the service does at
			// once still measures a queue. One that finds minRTT lower
			// than the last by more than the tolerance says the last was
			// such (or the service got faster): measure again after the
			// next window, at ¾ of the limit it gives, until two probes
			// agree. A probe of such a chain only looks for a lower
			// minRTT: one that comes out higher is noise, not news.
			l.again = l.minRTT == 0 || float64(m) < float64(l.minRTT)*(1-l.cfg.Tolerance)
			if l.chained {
				m = min(m, l.minRTT)
			}
			l.minRTT = m
		}
		l.newPhase(now)
	case now >= l.nextProbe:
		l.startProbe(now)
	case now-l.winStart >= l.cfg.SampleWindow && l.n.Load() >= l.needN.Load():
		l.window()
		l.chained = l.again
		if l.again {
			l.again, l.nextProbe = false, now
		}
		l.newPhase(now)
	}
	return l.current() != before
}

// untilProbe is the time from now until the next probe starts: 0 during
// one, the rest of this window when another follows it.
func (l *limit) untilProbe(now int64) int64 {
	switch {
	case l.probing:
		return 0
	case l.again:
		return max(0, l.winStart+l.cfg.SampleWindow-now)
	}
	return max(0, l.nextProbe-now)
}

func (l *limit) startProbe(now int64) {
	l.probing = true
	l.newPhase(now)
}

// newPhase starts counting answers afresh (a new epoch).
func (l *limit) newPhase(now int64) {
	l.epoch.Add(1)
	l.n.Store(0)
	l.drops.Store(0)
	l.winStart, l.full = now, false
	if l.probing {
		// The first answers of a round are its fast ones: the probe
		// skips one round (probeLimit answers) and takes the clipped mean of
		// the probeSamples after it.
		l.needN.Store(probeSamples + l.probeLimit())
		l.windowDue.Store(now)
		l.probeDue.Store(math.MaxInt64)
		return
	}
	l.needN.Store(max(windowSamples, 2*int64(l.est)))
	l.windowDue.Store(now + l.cfg.SampleWindow)
	l.probeDue.Store(l.nextProbe)
}

// window moves the limit by the window's latency, or backs it off
// when too many answers failed.
func (l *limit) window() {
	n, drops := l.n.Load(), l.drops.Load()
	next := l.est
	if m := l.clippedMean(ringSize); m > 0 && l.minRTT > 0 {
		l.lastRTT = m
		g := float64(l.minRTT) * (1 + l.cfg.Tolerance) / float64(m)
		g = math.Min(math.Max(g, 0.5), 2)
		next = l.est*g + 1
		if !l.full {
			next = math.Min(next, l.est)
		}
	}
	if float64(drops) > dropShare*float64(n) {
		next = math.Min(next, l.est*backoff)
	}
	l.est = math.Min(math.Max(next, float64(l.cfg.MinLimit)), float64(l.cfg.MaxLimit))
}

// clippedMean of the newest k latencies recorded in this phase (at most
// ringSize): their mean, each counted at most twice their median.
func (l *limit) clippedMean(k int64) int64 {
	n := l.n.Load()
	k = min(n, k, ringSize)
	s := l.scratch[:0]
	for i := n - k; i < n; i++ {
		if v := l.ring[i%ringSize].Load(); v > 0 {
			s = append(s, v)
		}
	}
	l.scratch = s
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	limit := 2 * s[len(s)/2]
	var sum int64
	for _, v := range s {
		sum += min(v, limit)
	}
	return sum / int64(len(s))
}
