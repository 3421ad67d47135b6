package ratelimit

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/ratelimit/overload"
)

// Engine keeps one rule's counters and decides requests. The local engine
// (here) keeps them in this process's memory; the cluster engine
// (cluster.go, scope cluster) keeps the rate counters in Redis behind the
// same interface and a local table for in-flight slots.
type Engine interface {
	// Take decides one request of rule r for key at now (ns).
	Take(r *Rule, key []byte, now int64) Decision
	// Release frees the in-flight slot of an admitted request.
	Release(d *Decision)
	// Keys is the number of keys tracked.
	Keys() int64
	// InFlight is the number of admitted requests not finished yet.
	InFlight() int64
}

// Reason says why a request was refused.
type Reason uint8

const (
	Allowed Reason = iota
	RateLimited
	TooManyInFlight      // max_concurrent for the key
	TooManyInFlightTotal // max_concurrent_total for the rule
	RedisUnavailable     // scope cluster, Redis failed, on_redis_error deny
	OverAdaptiveLimit    // max_concurrent adaptive: the queue for its limit refused
)

// Decision is the outcome of one Take.
type Decision struct {
	Reason    Reason
	Limits    *Limits // the quota that applied (the rule's, or an override)
	Remaining int64
	// Reset is the wait in ns until the quota is whole again (token bucket)
	// or the current window ends (sliding window); RetryAfter the wait until
	// this request would pass. Both are hints: other traffic changes them.
	Reset      int64
	RetryAfter int64
	// Unknown: decided without quota information (Redis failed and
	// on_redis_error is allow or deny), so no rate limit headers.
	Unknown bool
	// cal is the calendar window decided in (limit_type calendar).
	cal *calendarWindow

	slot  *entry // holds an in-flight slot to release
	shard *shard // slot's shard; a local settling rule's entry's too
	total bool   // holds a slot of max_concurrent_total
	// at and gen: a local settling rule's entry index in shard when
	// admitted, and the shard's gen then, so the settlement finds the
	// entry without a lookup (settleAt).
	at  int32
	gen uint32

	// Wait (ns) is how long a paced request waits for its slot before it
	// goes on; meanwhile it holds a place in the rule's queue.
	Wait   int64
	queued *atomic.Int64
	// adaptive: the request holds a slot of max_concurrent adaptive
	// (ticket), released with the upstream's latency (adaptive.go).
	adaptive *overload.Controller
	ticket   overload.Ticket
	// shed: how the adaptive queue refused the request, and its class.
	shed  overload.Outcome
	class overload.Class
}

// OK reports whether the request may pass.
func (d *Decision) OK() bool { return d.Reason == Allowed }

// localEngine is the in-memory engine: a sharded table of per-key state.
type localEngine struct {
	tab       *table
	typ       LimitType
	inflight  atomic.Int64
	flowState // pacing queue and adaptive limit (flow.go)
	// slotsOnly: count in-flight slots only, no rate (a cluster engine's
	// in-flight caps, which stay per instance, or a rule without qps).
	slotsOnly bool
}

func newLocalEngine(r *Rule) *localEngine {
	return &localEngine{tab: newTable(shardsFor(r.MaxKeys)), typ: r.Type, slotsOnly: r.inFlightOnly}
}

func (e *localEngine) Keys() int64           { return e.tab.keys.Load() }
func (e *localEngine) sweep(now, idle int64) { e.tab.sweep(now, idle) }

// InFlight counts the adaptive limit's slots when the rule has one (its
// requests hold no other slot unless max_concurrent_total is set too).
func (e *localEngine) InFlight() int64 {
	if c := e.adaptive.Load(); c != nil {
		return c.InFlight()
	}
	return e.inflight.Load()
}

// Take admits or refuses a request of the rule's cost; it allocates only
// for a key it has not seen before.
func (e *localEngine) Take(r *Rule, key []byte, now int64) Decision {
	return e.take(r, key, now, r.Cost)
}

// take is Take for a request of cost tokens.
func (e *localEngine) take(r *Rule, key []byte, now int64, cost int64) Decision {
	d := Decision{Limits: &r.Limits}
	if len(r.Overrides) > 0 {
		if l := r.Overrides[string(key)]; l != nil {
			d.Limits = l
		}
	}
	l := d.Limits
	// The adaptive limit's slot is taken before (adaptive.go).
	if r.MaxConcurrentTotal > 0 {
		if e.inflight.Add(1) > r.MaxConcurrentTotal {
			e.inflight.Add(-1)
			d.Reason = TooManyInFlightTotal
			return d
		}
		d.total = true
	} else if r.MaxConcurrent > 0 {
		e.inflight.Add(1)
		d.total = true
	}
	if e.slotsOnly && r.MaxConcurrent == 0 {
		noQuota(r, &d)
		return d
	}
	h := e.tab.hash(key) // once, for the shard and the entry
	s := e.tab.shardOf(h)
	perShard := max(1, r.MaxKeys/len(e.tab.shards))
	s.mu.Lock()
	at := e.tab.findKept(s, key, h, now, r.idle, perShard, e.keeps(r))
	ent := s.at(at)
	if r.MaxConcurrent > 0 && ent.inflight >= r.MaxConcurrent {
		s.mu.Unlock()
		e.releaseTotal(&d)
		d.Reason = TooManyInFlight
		return d
	}
	ok := true
	var left float64
	n, spend := float64(cost), float64(cost)
	if r.settles {
		spend = float64(r.Reserve) // the rest is settled after the response
	}
	if e.slotsOnly {
		noQuota(r, &d) // the rate is decided elsewhere, or there is none
	} else if r.Flow.Behavior != Reject {
		ok = e.shape(r, ent, l, now, n, &d)
		left = float64(d.Remaining)
	} else if e.typ == Calendar {
		ok, left = takeCalendar(ent, r, l, now, n, spend, &d)
	} else if e.typ == SlidingWindow {
		ok, left, d.RetryAfter = ent.sw.admit(now, l.Window, l.Max, n, spend)
		d.Reset = ent.sw.untilWindowEnd(now, l.Window)
	} else {
		ok, left, d.RetryAfter = ent.tb.admit(now, l.QPS, l.Burst, n, spend)
		d.Reset = ent.tb.untilFull(l.QPS, l.Burst)
	}
	d.Remaining = int64(left)
	if ok && r.MaxConcurrent > 0 {
		ent.inflight++
		d.slot, d.shard = ent, s
	}
	if ok && r.settles {
		d.shard, d.at, d.gen = s, at, s.gen
	}
	s.mu.Unlock()
	if !ok {
		e.releaseTotal(&d)
		d.Reason = RateLimited
	}
	return d
}

// noQuota marks the decision of a rule without a rate (in-flight caps
// only) as carrying no quota: no headers, no limit or remaining.
func noQuota(r *Rule, d *Decision) {
	if r.inFlightOnly {
		d.Limits, d.Unknown = nil, true
	}
}

func (e *localEngine) releaseTotal(d *Decision) {
	if d.total {
		e.inflight.Add(-1)
		d.total = false
	}
}

// Release frees d's in-flight slots; calling it twice is harmless.
func (e *localEngine) Release(d *Decision) {
	if d.slot != nil {
		d.shard.mu.Lock()
		d.slot.inflight--
		d.shard.mu.Unlock()
		d.slot, d.shard = nil, nil
	}
	e.releaseTotal(d)
}
