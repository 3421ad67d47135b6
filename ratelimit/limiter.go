package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Engine keeps one rule's counters and decides requests. The local engine
// keeps them in this process's memory; a cluster engine (scope cluster, a
// later change) can keep the rate counters in Redis behind the same
// interface and reuse a local table for in-flight slots.
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
	OverAdaptiveLimit    // max_concurrent adaptive: the limit found now
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

	slot  *entry // holds an in-flight slot to release
	shard *shard
	total bool // holds a slot of max_concurrent_total (or adaptive)

	// Wait (ns) is how long a paced request waits for its slot before it
	// goes on; meanwhile it holds a place in the rule's queue.
	Wait   int64
	queued *atomic.Int64
	// adaptive: observe the request's latency (max_concurrent adaptive);
	// admittedAt is the in-flight count its admission made.
	adaptive   *gradient
	admittedAt int64
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
	// in-flight caps, which stay per instance).
	slotsOnly bool
}

func newLocalEngine(r *Rule) *localEngine {
	return &localEngine{tab: newTable(shardsFor(r.MaxKeys)), typ: r.Type}
}

func (e *localEngine) Keys() int64           { return e.tab.keys.Load() }
func (e *localEngine) sweep(now, idle int64) { e.tab.sweep(now, idle) }
func (e *localEngine) InFlight() int64       { return e.inflight.Load() }

// Take admits or refuses a request; it allocates only for a key it has not
// seen before.
func (e *localEngine) Take(r *Rule, key []byte, now int64) Decision {
	d := Decision{Limits: &r.Limits}
	if len(r.Overrides) > 0 {
		if l := r.Overrides[string(key)]; l != nil {
			d.Limits = l
		}
	}
	l := d.Limits
	if r.Flow.Adaptive != nil {
		if !e.admitAdaptive(r, &d) {
			return d
		}
	} else if r.MaxConcurrentTotal > 0 {
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
		return d
	}
	s := e.tab.shard(key)
	perShard := max(1, r.MaxKeys/len(e.tab.shards))
	s.mu.Lock()
	ent := e.tab.get(s, key, now, r.idle, perShard)
	if r.MaxConcurrent > 0 && ent.inflight >= r.MaxConcurrent {
		s.mu.Unlock()
		e.releaseTotal(&d)
		d.Reason = TooManyInFlight
		return d
	}
	ok := true
	var left float64
	cost := float64(r.Cost)
	if e.slotsOnly {
		// the rate is decided elsewhere
	} else if r.Flow.Behavior != Reject {
		ok = e.shape(r, ent, l, now, cost, &d)
		left = float64(d.Remaining)
	} else if e.typ == SlidingWindow {
		ok, left, d.RetryAfter = ent.sw.take(now, l.Window, l.Max, cost)
		d.Reset = ent.sw.untilWindowEnd(now, l.Window)
	} else {
		ok, left, d.RetryAfter = ent.tb.take(now, l.QPS, l.Burst, cost)
		d.Reset = ent.tb.untilFull(l.QPS, l.Burst)
	}
	d.Remaining = int64(left)
	if ok && r.MaxConcurrent > 0 {
		ent.inflight++
		d.slot, d.shard = ent, s
	}
	s.mu.Unlock()
	if !ok {
		e.releaseTotal(&d)
		d.Reason = RateLimited
	}
	return d
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

// limiter is the state of one rule id, shared by every handler using it and
// kept across config reloads (handlerkit.Shared). When the rule changes it
// keeps the counters if the engine kind is the same, else starts afresh.
type limiter struct {
	id       string
	counters *ruleCounters
	flow     flowMetrics
	inline   *Rule // the first parse of an inline rule, shared by its handlers
	state    atomic.Pointer[limiterState]
	backend  atomic.Pointer[backendRef] // Redis for scope cluster
	mu       sync.Mutex                 // serialises rule changes
	now      func() int64
	stop     chan struct{}
	once     sync.Once
	exceeded exceededSampler // ratelimit_exceeded events (admin.go)
}

type limiterState struct {
	rule   *Rule
	engine Engine
}

// epoch anchors the monotonic clock; ns since epoch are never 0 in practice
// (a zero time means "new" to the token bucket), so it starts at 1s.
var epoch = time.Now().Add(-time.Second)

func monotonicNow() int64 { return int64(time.Since(epoch)) }

func newLimiter(id string, now func() int64) *limiter {
	if now == nil {
		now = monotonicNow
	}
	l := &limiter{id: id, now: now, stop: make(chan struct{}), counters: countersFor(id), flow: flowMetricsFor(id)}
	go l.janitor()
	return l
}

// engine returns the engine for rule r, adopting r if it is new.
func (l *limiter) engine(r *Rule) Engine {
	if s := l.state.Load(); s != nil && s.rule == r {
		return s.engine
	}
	return l.adopt(r)
}

func (l *limiter) adopt(r *Rule) Engine {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state.Load()
	if s != nil && s.rule == r {
		return s.engine
	}
	if s != nil {
		switch old := s.engine.(type) {
		case *localEngine:
			if !r.Cluster() && old.typ == r.Type && len(old.tab.shards) == shardsFor(r.MaxKeys) {
				l.store(r, old)
				return old
			}
		case *clusterEngine:
			if old.fits(r) {
				l.store(r, old)
				return old
			}
		}
	}
	var e Engine
	if r.Cluster() {
		e = newClusterEngine(r, l)
	} else {
		e = newLocalEngine(r)
	}
	l.store(r, e)
	return e
}

// store publishes rule r with engine e, after fitting e's flow state (the
// adaptive limit) to r, so no request sees r without it.
func (l *limiter) store(r *Rule, e Engine) {
	if le, ok := e.(*localEngine); ok {
		le.configureFlow(r, l.now())
	}
	l.state.Store(&limiterState{rule: r, engine: e})
}

// setBackend points the limiter's cluster engine at a config's Redis; the
// newest config to use the rule id wins.
func (l *limiter) setBackend(b Backend, logger *zap.Logger) {
	if cur := l.backend.Load(); cur != nil && cur.b == b {
		return
	}
	l.backend.Store(&backendRef{b: b, logger: logger})
}

// intern returns the one *Rule every handler of an inline rule uses, so the
// hot path's pointer comparison sees no change between them (an inline
// rule's id is a hash of its fields: same id, same rule).
func (l *limiter) intern(r *Rule) *Rule {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inline == nil {
		l.inline = r
	}
	return l.inline
}

// janitor drops idle keys now and then, so memory comes back even for keys
// never seen again.
func (l *limiter) janitor() {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if s := l.state.Load(); s != nil {
				if e, ok := s.engine.(interface{ sweep(now, idle int64) }); ok {
					e.sweep(l.now(), s.rule.idle)
				}
			}
		}
	}
}

// Destruct stops the janitor; the pool calls it when no config uses the
// rule id any more.
func (l *limiter) Destruct() error {
	l.once.Do(func() {
		close(l.stop)
		dropCounters(l.id)
		dropFlowMetrics(l.id)
	})
	return nil
}
