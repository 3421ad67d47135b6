package cluster

import (
	"github.com/sluicegw/sluice/ratelimit/engine"
	"math"
)

// pace decides a request of a paced cluster rule (control_behavior pace,
// scope cluster): one script call per request reserves its slot in the
// fleet-wide schedule in Redis (paceLua), and the request then waits for
// it locally like a locally paced one (the handler's serve step, waitTurns: a timer,
// no lock, ending early when the client goes, holding its in-flight
// slots).
//
// A request holds a place in the rule's queue (max_queued, per instance)
// from before it asks Redis until its slot comes, so a flood costs at most
// max_queued goroutines and Redis calls at a time: the rest are refused at
// once without a Redis call. A slot is reserved only when it lies within
// max_queue_wait; one reserved by a request that then times out on Redis
// or whose client goes is left unused, which can only admit less.
//
// A refusal is remembered until Redis said a slot within max_queue_wait
// could come (exact: other instances can only move the schedule later; a
// changed rule forgets it), so a flood of refused requests does not reach
// Redis either.
//
// Warm-up with scope cluster goes the same way, its curve in Redis
// (warmLua): warm_up_pace waits for its slot as pace does; warm_up takes
// no place in the queue and does not wait (a slot within its tolerance is
// admitted at once, as the local warm_up does).
func (e *Engine) pace(r *Rule, key []byte, now int64, d *engine.Decision) {
	s, _, ls := e.lockLease(r, key, now)
	if ls.refusing(r, now, r.Cost) {
		d.Reason, d.RetryAfter, d.Remaining, d.Reset = engine.RateLimited, ls.deniedUntil-now, 0, max(0, ls.resetAt-now)
		s.Unlock()
		return
	}
	s.Unlock()
	if !r.Flow.Behavior.Paces() {
		e.warmUp(r, key, now, d, s, ls)
		return
	}
	q := e.slots.Queued()
	if q.Add(1) > r.Flow.MaxQueued {
		q.Add(-1)
		// The queue drains one slot per interval at the fleet's rate at
		// least; the hint is the next slot's distance at that rate.
		d.Reason, d.Remaining = engine.RateLimited, 0
		d.RetryAfter = engine.CeilNanos(math.Min(float64(r.Cost)/d.Limits.QPS, engine.MaxFlowSeconds))
		return
	}
	g, err := e.call(r, d.Limits, key, r.Cost, r.Cost)
	if err != nil {
		q.Add(-1)
		e.Fail(r, key, now, r.Cost, d)
		return
	}
	d.Remaining, d.Reset = g.Remaining, g.Reset
	switch {
	case g.N == 0:
		q.Add(-1)
		d.Reason, d.RetryAfter = engine.RateLimited, g.Wait
		// now was read before the call, so now + wait ends no later than
		// the refusal Redis computed.
		s.Lock()
		ls.deniedUntil, ls.deniedBy, ls.resetAt = now+g.Wait, r, now+g.Reset
		s.Unlock()
	case g.Wait == 0:
		q.Add(-1)
	default:
		d.Wait, d.Queued = g.Wait, q
	}
}

// warmUp decides a request of a warm_up cluster rule: admitted at once or
// refused (the refusal remembered), never waiting.
func (e *Engine) warmUp(r *Rule, key []byte, now int64, d *engine.Decision, s *engine.Shard, ls *leaseState) {
	g, err := e.call(r, d.Limits, key, r.Cost, r.Cost)
	if err != nil {
		e.Fail(r, key, now, r.Cost, d)
		return
	}
	d.Remaining, d.Reset = g.Remaining, g.Reset
	if g.N == 0 {
		d.Reason, d.RetryAfter = engine.RateLimited, g.Wait
		s.Lock()
		ls.deniedUntil, ls.deniedBy, ls.resetAt = now+g.Wait, r, now+g.Reset
		s.Unlock()
	}
}
