package ratelimit

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/ratelimit/overload"
)

// maxFlowSeconds caps the intervals of a flow schedule (a rule with a qps
// far below 1/hour), so the ns arithmetic cannot overflow.
const maxFlowSeconds = 3600

// flowState is a local engine's per-rule flow-shaping state: the number of
// paced requests waiting, and the adaptive in-flight limit with its queue.
type flowState struct {
	queued   atomic.Int64
	adaptive atomic.Pointer[overload.Controller]
}

// configureFlow fits the engine to rule r: it starts the adaptive limit
// when r has one, hands a changed configuration to the running one
// (keeping what it learnt), and drops it when r has none.
func (e *localEngine) configureFlow(r *Rule, now int64) {
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

// adaptiveOf is the adaptive limit of a local engine, if it has one.
func adaptiveOf(eng Engine) *overload.Controller {
	if le, ok := eng.(*localEngine); ok {
		return le.adaptive.Load()
	}
	return nil
}

// shape decides the rate of a request under pace, warm_up or warm_up_pace
// in key's locked entry: admitted at once, admitted to wait d.Wait for its
// slot (holding a place in the rule's queue), or refused with the true
// d.RetryAfter. It fills d.Remaining and d.Reset.
func (e *localEngine) shape(r *Rule, ent *entry, l *Limits, now int64, cost float64, d *Decision) bool {
	fl := &r.Flow
	tolerance := fl.tolerance(l, cost)
	m := &l.warm
	var wait int64
	if fl.Behavior.warms() {
		ent.warm.sync(now, m)
		wait = ent.warm.next - now
	} else {
		wait = ent.pace.slot(now)
	}
	if wait > tolerance {
		d.RetryAfter, d.Reset = wait-tolerance, wait
		return false
	}
	if wait > 0 && fl.Behavior.paces() {
		if e.queued.Add(1) > fl.MaxQueued {
			e.queued.Add(-1)
			d.RetryAfter, d.Reset = wait, wait
			return false
		}
		d.Wait, d.queued = wait, &e.queued
	}
	var next, interval int64
	if fl.Behavior.warms() {
		next, interval = ent.warm.spend(cost, m) // synced above
	} else {
		interval = ceilNanos(min(cost/l.QPS, maxFlowSeconds))
		ent.pace.commit(now, interval)
		next = ent.pace.tat
	}
	d.Reset = next - now
	if free := now + tolerance - next; free >= 0 {
		d.Remaining = free/max(interval, 1) + 1
	}
	return true
}

// tolerance is how far ahead (ns) a request's slot may lie and the
// request still be admitted: max_queue_wait when it waits for the slot;
// for warm_up, which refuses instead of queueing, the time of a burst of
// `burst` requests (of burst/cold_factor while cold).
func (fl *Flow) tolerance(l *Limits, cost float64) int64 {
	if fl.Behavior.paces() {
		return fl.MaxQueueWait
	}
	return ceilNanos(min((l.Burst-cost)/l.QPS, maxFlowSeconds))
}

// FlowState is a rule's flow shaping in GET /sluice/state.
type FlowState struct {
	// ControlBehavior is reject, pace, warm_up or warm_up_pace.
	ControlBehavior string `json:"control_behavior"`
	// Queued is the number of paced requests waiting for their slot now.
	Queued int64 `json:"queued"`
	// Adaptive is the max_concurrent adaptive limit: the limit in force,
	// minRTT, the last window's latency and the queue by priority class.
	Adaptive *AdaptiveState `json:"adaptive,omitempty"`
}

func flowStateOf(s *limiterState) *FlowState {
	fl := &s.rule.Flow
	if fl.Behavior == Reject && fl.Adaptive == nil {
		return nil
	}
	var le *localEngine
	switch e := s.engine.(type) {
	case *localEngine:
		le = e
	case *clusterEngine:
		// A paced cluster rule's waiting requests: those holding a slot
		// reserved in Redis, and those paced locally while Redis fails.
		return &FlowState{ControlBehavior: fl.Behavior.String(), Queued: e.slots.queued.Load() + e.fallback.queued.Load()}
	default:
		return nil
	}
	out := &FlowState{ControlBehavior: fl.Behavior.String(), Queued: le.queued.Load()}
	if c := le.adaptive.Load(); c != nil {
		out.Adaptive = adaptiveStateOf(c.State())
	}
	return out
}

// AdaptiveState is the adaptive limit in GET /sluice/state.
type AdaptiveState struct {
	overload.State
	// Queue: per priority class (critical, high, normal, low, sheddable),
	// the requests waiting now, and since the rule started those admitted
	// after waiting and those refused (queue_full, queue_timeout,
	// pushed_out). Classes that never queued are left out.
	Queue map[string]overload.ClassState `json:"queue,omitempty"`
}

func adaptiveStateOf(st overload.State) *AdaptiveState {
	out := &AdaptiveState{State: st}
	for i, c := range st.Classes {
		if c != (overload.ClassState{}) {
			if out.Queue == nil {
				out.Queue = map[string]overload.ClassState{}
			}
			out.Queue[overload.Class(i).String()] = c
		}
	}
	return out
}
