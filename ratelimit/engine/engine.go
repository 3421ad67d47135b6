package engine

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/ratelimit/overload"
)

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
	// Cal is the calendar window decided in (limit_type calendar).
	Cal *Window
	// At is the time the request was decided at (engine ns): a recorder
	// notes it without reading the clock again.
	At int64

	slot  *entry // holds an in-flight slot to release
	shard *Shard // slot's shard; a local settling rule's entry's too
	total bool   // holds a slot of max_concurrent_total
	// at and gen: a local settling rule's entry index in shard when
	// admitted, and the shard's gen then, so the settlement finds the
	// entry without a lookup (settleAt).
	at  int32
	gen uint32
	// KeyIn and TotalIn are the requests in flight of the key and of the
	// rule when the request arrived, before it took a slot: what
	// max_concurrent and max_concurrent_total compare (counted only
	// when the rule has either cap; a recorder notes them).
	KeyIn, TotalIn int32

	// Wait (ns) is how long a paced request waits for its slot before it
	// goes on; meanwhile it holds a place in the rule's queue.
	Wait   int64
	Queued *atomic.Int64
	// Adaptive: the request holds a slot of max_concurrent adaptive
	// (Ticket), released with the upstream's latency.
	Adaptive *overload.Controller
	Ticket   overload.Ticket
	// Shed: how the adaptive queue refused the request, and its Class.
	Shed  overload.Outcome
	Class overload.Class
}

// OK reports whether the request may pass.
func (d *Decision) OK() bool { return d.Reason == Allowed }

// Local is the in-memory engine: a sharded table of per-key state.
type Local struct {
	tab       *Table
	typ       LimitType
	inflight  atomic.Int64
	flowState // pacing queue and adaptive limit (flow.go)
	// slotsOnly: count in-flight slots only, no rate (a cluster engine's
	// in-flight caps, which stay per instance, or a rule without qps).
	slotsOnly bool
}

// NewLocal is an empty engine for rule r.
func NewLocal(r *Spec) *Local {
	e := new(Local)
	e.Init(r, r.InFlightOnly)
	return e
}

// Init makes e an empty engine for rule r; slotsOnly: e counts in-flight
// slots only (a cluster engine's caps, which stay per instance).
func (e *Local) Init(r *Spec, slotsOnly bool) {
	e.tab, e.typ, e.slotsOnly = NewTable(ShardsFor(r.MaxKeys)), r.Type, slotsOnly
}

// Holds reports whether e's table holds rule r's keys as they are: the
// same engine type and number of shards.
func (e *Local) Holds(r *Spec) bool {
	return e.typ == r.Type && len(e.tab.shards) == ShardsFor(r.MaxKeys)
}

// SlotsOnly reports whether e counts in-flight slots only.
func (e *Local) SlotsOnly() bool { return e.slotsOnly }

// Table is e's key table.
func (e *Local) Table() *Table { return e.tab }

func (e *Local) Keys() int64           { return e.tab.keys.Load() }
func (e *Local) Sweep(now, idle int64) { e.tab.Sweep(now, idle) }

// InFlight counts the adaptive limit's slots when the rule has one (its
// requests hold no other slot unless max_concurrent_total is set too).
func (e *Local) InFlight() int64 {
	if c := e.adaptive.Load(); c != nil {
		return c.InFlight()
	}
	return e.inflight.Load()
}

// Take admits or refuses a request of the rule's cost; it allocates only
// for a key it has not seen before.
func (e *Local) Take(r *Spec, key []byte, now int64) Decision {
	return e.TakeCost(r, key, now, r.Cost)
}

// take is Take for a request of cost tokens.
func (e *Local) TakeCost(r *Spec, key []byte, now int64, cost int64) Decision {
	d := Decision{Limits: &r.Limits, At: now}
	if len(r.Overrides) > 0 {
		if l := r.Overrides[string(key)]; l != nil {
			d.Limits = l
		}
	}
	l := d.Limits
	// The adaptive limit's slot is taken before (adaptive.go).
	if r.MaxConcurrentTotal > 0 {
		n := e.inflight.Add(1)
		d.TotalIn = int32(min(n-1, 1<<31-1))
		if n > r.MaxConcurrentTotal {
			e.inflight.Add(-1)
			d.Reason = TooManyInFlightTotal
			return d
		}
		d.total = true
	} else if r.MaxConcurrent > 0 {
		d.TotalIn = int32(min(e.inflight.Add(1)-1, 1<<31-1))
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
	at := e.tab.findKept(s, key, h, now, r.Idle, perShard, e.keeps(r))
	ent := s.at(at)
	d.KeyIn = ent.inflight
	if r.MaxConcurrent > 0 && ent.inflight >= r.MaxConcurrent {
		s.mu.Unlock()
		e.releaseTotal(&d)
		d.Reason = TooManyInFlight
		return d
	}
	ok := true
	var left float64
	n, spend := float64(cost), float64(cost)
	if r.Settles {
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
	if ok && r.Settles {
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
func noQuota(r *Spec, d *Decision) {
	if r.InFlightOnly {
		d.Limits, d.Unknown = nil, true
	}
}

func (e *Local) releaseTotal(d *Decision) {
	if d.total {
		e.inflight.Add(-1)
		d.total = false
	}
}

// Release frees d's in-flight slots; calling it twice is harmless.
func (e *Local) Release(d *Decision) {
	if d.slot != nil {
		d.shard.mu.Lock()
		d.slot.inflight--
		d.shard.mu.Unlock()
		d.slot, d.shard = nil, nil
	}
	e.releaseTotal(d)
}

// HoldsSlot reports whether d holds an in-flight slot to Release.
func (d *Decision) HoldsSlot() bool { return d.slot != nil || d.total }

// ForgetSlots marks d as holding no in-flight slot (its copy released
// them).
func (d *Decision) ForgetSlots() { d.slot, d.shard, d.total = nil, nil, false }

// String is the reason as metrics and logs name it.
func (r Reason) String() string {
	switch r {
	case RateLimited:
		return "rate"
	case TooManyInFlight:
		return "max_concurrent"
	case TooManyInFlightTotal:
		return "max_concurrent_total"
	case RedisUnavailable:
		return "redis_unavailable"
	case OverAdaptiveLimit:
		return "max_concurrent_adaptive"
	}
	return "allowed"
}
