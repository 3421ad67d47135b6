package engine

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/ratelimit/overload"
)

// MaxFlowSeconds caps the intervals of a flow schedule (a rule with a qps
// far below 1/hour), so the ns arithmetic cannot overflow.
const MaxFlowSeconds = 3600

// flowState is a local engine's per-rule flow-shaping state: the number of
// paced requests waiting, and the adaptive in-flight limit with its queue.
type flowState struct {
	queued   atomic.Int64
	adaptive atomic.Pointer[overload.Controller]
}

// configureFlow fits the engine to rule r: it starts the adaptive limit
// when r has one, hands a changed configuration to the running one
// (keeping what it learnt), and drops it when r has none.
func (e *Local) ConfigureFlow(r *Spec, now int64) {
	a := r.Flow.Adaptive
	if a == nil {
		e.adaptive.Store(nil)
		return
	}
	if c := e.adaptive.Load(); c != nil {
		c.Configure(*a)
		return
	}
	e.adaptive.Store(overload.New(*a, now))
}

// shape decides the rate of a request under pace, warm_up or warm_up_pace
// in key's locked entry: admitted at once, admitted to wait d.Wait for its
// slot (holding a place in the rule's queue), or refused with the true
// d.RetryAfter. It fills d.Remaining and d.Reset.
func (e *Local) shape(r *Spec, ent *entry, l *Limits, now int64, cost float64, d *Decision) bool {
	fl := &r.Flow
	tolerance := fl.Tolerance(l, cost)
	m := &l.Warm
	var wait int64
	if fl.Behavior.Warms() {
		ent.warm.sync(now, m)
		wait = ent.warm.next - now
	} else {
		wait = ent.pace.slot(now)
	}
	if wait > tolerance {
		d.RetryAfter, d.Reset = wait-tolerance, wait
		return false
	}
	if wait > 0 && fl.Behavior.Paces() {
		if e.queued.Add(1) > fl.MaxQueued {
			e.queued.Add(-1)
			d.RetryAfter, d.Reset = wait, wait
			return false
		}
		d.Wait, d.Queued = wait, &e.queued
	}
	var next, interval int64
	if fl.Behavior.Warms() {
		next, interval = ent.warm.spend(cost, m) // synced above
	} else {
		interval = CeilNanos(min(cost/l.QPS, MaxFlowSeconds))
		ent.pace.commit(now, interval)
		next = ent.pace.tat
	}
	d.Reset = next - now
	if free := now + tolerance - next; free >= 0 {
		d.Remaining = free/max(interval, 1) + 1
	}
	return true
}

// Tolerance is how far ahead (ns) a request's slot may lie and the
// request still be admitted: max_queue_wait when it waits for the slot;
// for warm_up, which refuses instead of queueing, the time of a burst of
// `burst` requests (of burst/cold_factor while cold).
func (fl *Flow) Tolerance(l *Limits, cost float64) int64 {
	if fl.Behavior.Paces() {
		return fl.MaxQueueWait
	}
	return CeilNanos(min((l.Burst-cost)/l.QPS, MaxFlowSeconds))
}

// Adaptive is e's adaptive in-flight limit, if its rule has one.
func (e *Local) Adaptive() *overload.Controller { return e.adaptive.Load() }

// Queued counts e's paced requests waiting for their slot.
func (e *Local) Queued() *atomic.Int64 { return &e.queued }
