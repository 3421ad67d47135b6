package ratelimit

// The first round trip of a fresh adaptive limit. Until its first answers
// come back the controller knows nothing of the upstream: it admits
// initial_limit and, before, refused the rest. Those clients came back
// about when the first answers did, and the ones that came before slow
// start's first step (at half of the first answers) were refused a second
// time: at 200 ms, 60 clients and initial_limit 8, 52 to 104 refusals,
// 2.2-4.4 % of an 8 s run, on every restart or deploy of the gateway.
//
// So a request that finds the first limit full waits for that first step
// instead (or for the first minRTT's end, whichever comes first), for at
// most one sample window, and then asks for a slot once more: admitted
// under the new limit, or refused. No more wait than the step can admit:
// it takes the limit at most to slowStartJump times initial_limit (and
// max_limit), and the waiters beyond that are refused at once. A waiter is
// demand beyond the limit: its refusal (refuse) sizes the step.
// After the first step nobody waits: from then on the limit is measured,
// and a request over it is refused.

// firstRoundWait takes a waiter's place for a request refused (refuse)
// while the first round trip is on, if the step could still admit it. It
// returns the channel closed at the step and the longest wait (ns, one
// sample window), or ok false: refuse now. A waiter calls doneWaiting
// when it stops waiting.
func (g *gradient) firstRoundWait() (step <-chan struct{}, wait int64, ok bool) {
	if !g.inFirstRound() {
		return nil, 0, false
	}
	if g.waiters.Add(1) > g.maxWaiters {
		g.waiters.Add(-1)
		return nil, 0, false
	}
	g.mu.Lock()
	wait = g.cfg.SampleWindow
	g.mu.Unlock()
	return g.firstRound, wait, true
}

// doneWaiting gives a waiter's place back.
func (g *gradient) doneWaiting() { g.waiters.Add(-1) }

// inFirstRound reports whether slow start's first step is still to come.
func (g *gradient) inFirstRound() bool {
	select {
	case <-g.firstRound:
		return false
	default:
		return true
	}
}

// endFirstRound wakes the waiters: the first step was taken, or the first
// minRTT ended without one. Called with g.mu held, so it closes once.
func (g *gradient) endFirstRound() {
	if g.inFirstRound() {
		close(g.firstRound)
	}
}
