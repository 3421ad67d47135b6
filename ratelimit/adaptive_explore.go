package ratelimit

import "math"

// Exploring a held limit. Within the tolerance, with a queue above the
// headroom, the limit holds (update). That is right when the queue is
// real, and wrong when minRTT was read low: a healthy service then looks
// queued by the same share, and the limit holds below the demand until
// the next probe, min_rtt_interval away. On a real Caddy beside
// stress-ng (20 ms, 60 clients, no capacity limit) a first minRTT read
// 17 % low (19.1 ms for 23 ms) held the limit at 40 and refused 32 % of
// the requests for the whole run, twice in about 130 runs.
//
// The window's latency alone cannot tell the two apart; how it moves with
// what is let in can. So a limit held full (requests refused) within the
// tolerance for exploreAfter windows of at least exploreSamples requests
// is raised by the probe share (at least one request), and the window
// after judges it: in front of a queue latency grows in proportion to the
// requests in flight, without one it stays. Latency that grew by more
// than the square root of the growth in flight (half way, in ratio) is a
// queue: the raise is undone and the next try waits twice as long (up to
// maxExploreAfter windows), so a limit at a real capacity pays a window
// of one probe share more now and then. Otherwise the raise stays and
// minRTT is measured again. Windows of fewer requests (long service times,
// small limits: a dozen requests read ± 9 %) cannot see a step of 12.5 %,
// and never explore.

// exploreSamples: a window explores or judges only with at least this
// many requests (its mean within about 3 % at a coefficient of variation
// of 0.3: a step of 12.5 % is 4 standard errors).
const exploreSamples = 100

// exploreAfter, maxExploreAfter: held windows before a try, at first and
// at most (after tries that met a queue).
const (
	exploreAfter    = 4
	maxExploreAfter = 64
)

// explore is the state of the exploring raise.
type explore struct {
	held  int     // windows held full within the tolerance in a row
	after int     // held windows that start a try
	from  int64   // the limit before the raise being judged (0: none)
	rtt   int64   // the latency of the window before it
	n     float64 // its mean in flight
}

// tryRaise is called for a window that held the limit: full, requests
// refused, latency within the tolerance but above the probe share. It
// returns the raised limit when a try is due, else 0.
func (e *explore) tryRaise(est float64, rtt int64, n float64, samples int, probe float64) float64 {
	if samples < exploreSamples {
		e.held = 0
		return 0
	}
	if e.after == 0 {
		e.after = exploreAfter
	}
	if e.held++; e.held < e.after {
		return 0
	}
	e.held = 0
	e.from, e.rtt, e.n = int64(est), rtt, n
	return math.Max(est*probe, est+1)
}

// judge is called for the window after a raise. queue: the latency grew
// with the requests let in (or the window cannot tell): the raise is to
// be undone to from. Otherwise it stays and minRTT is to be measured
// again.
func (e *explore) judge(rtt int64, n float64, samples int) (queue bool, from int64) {
	from, e.from = e.from, 0
	grew, slower := n/e.n, float64(rtt)/float64(e.rtt)
	if samples < exploreSamples || grew < 1.03 || slower*slower > grew {
		e.after = min(2*e.after, maxExploreAfter)
		return true, from
	}
	e.after = exploreAfter
	return false, from
}

// reset forgets a held run (the limit moved for another reason).
func (e *explore) reset() { e.held, e.from = 0, 0 }
