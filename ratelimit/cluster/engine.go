package cluster

import (
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/internal/metrickit"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"go.uber.org/zap"
)

// Backend is where a cluster engine finds Redis: the rule store app
// (*rulestore.App) in Caddy, anything else in tests.
type Backend interface {
	// Client is the shared Redis client; nil without Redis.
	Client() redis.UniversalClient
	// KeyPrefix is prepended to every Redis key.
	KeyPrefix() string
	// LiveInstances is the number of instances sharing the quota (≥ 1).
	LiveInstances() int
	// ClientState is a value kept with the client, made on first use
	// (rulestore.App.ClientState): the client's health gate.
	ClientState(key string, newValue func(redis.UniversalClient) any) any
}

// BackendRef is a limiter's Redis: the newest config's store, and its
// logger.
type BackendRef struct {
	B      Backend
	Logger *zap.Logger
}

// Host is what a cluster engine takes from the limiter of its rule id,
// which outlives the rule's versions: its clock, its Redis, and whether a
// handler has the rule among several limits (its refunds a remembered
// refusal must not outlive long: leaseState.recheckAt).
type Host interface {
	Now() int64
	// Backend is the Redis of the newest config using the rule, nil
	// before one.
	Backend() *BackendRef
	Listed() bool
}

// Counters are the rule's counters a cluster engine adds to; the handler
// exports them.
type Counters struct {
	RedisCalls, RedisErrors                    *metrickit.Counter
	FallbackAllow, FallbackDeny, FallbackLocal *metrickit.Counter
}

var errNoRedis = errors.New("no redis configured")

// Engine keeps a rule's counters in Redis (scope cluster), so every
// instance spends one quota. In-flight caps stay per instance. With a lease
// size, each instance takes blocks of tokens from Redis and spends them
// locally, topping up in the background before they run out; see decide
// for the over-admission bound. While Redis fails, decisions follow the
// rule's on_redis_error.
type Engine struct {
	typ      engine.LimitType
	host     Host
	counters Counters
	slots    *engine.Local // in-flight caps
	keys     *engine.Table // per key: lease and remembered refusal
	fallback *engine.Local // on_redis_error local: this instance's share
	share    atomic.Pointer[shareRule]
	warned   atomic.Bool // a reply error was logged
	leased   atomic.Bool // a rule with lease_size used it: keys idle for LeaseHold
	// warnedNoRedis: a cluster rule without Redis was logged
	warnedNoRedis atomic.Bool
}

// shareRule caches rule `of` scaled down to 1/n of its quota.
type shareRule struct {
	of   *Rule
	n    int
	rule *Rule
}

// leaseState is what an instance knows of one key's quota in Redis: the
// tokens it leased and has not spent yet, and until when Redis will refuse.
type leaseState struct {
	tokens      int64
	remaining   int64 // what Redis had left at the last call
	resetAt     int64 // ns (local clock): quota whole again, per the last call
	deniedUntil int64 // ns: Redis has fewer than requested_tokens until then
	deniedBy    *Rule // the rule version that computed deniedUntil
	deniedCost  int64 // the request cost deniedUntil was computed for
	// recheckAt (ns), when set, ends the local refusal before deniedUntil:
	// another instance's refund (response_cost) or a rule that is one of
	// several limits somewhere may give tokens back before then, which
	// this one cannot see (clusterRecheck, listedRecheck).
	recheckAt int64
	pending   bool // a lease call is in flight
}

// NewEngine is the cluster engine of rule r, in host (the limiter of r's
// id), adding to counters.
func NewEngine(r *Rule, host Host, counters Counters) *Engine {
	e := &Engine{
		typ:      r.Type,
		host:     host,
		counters: counters,
		slots:    new(engine.Local),
		keys:     engine.NewTable(engine.ShardsFor(r.MaxKeys)),
		fallback: new(engine.Local),
	}
	e.slots.Init(&r.Spec, true)
	e.fallback.Init(&r.Spec, r.InFlightOnly)
	return e
}

// Fits reports whether e can serve cluster rule r without losing state.
func (e *Engine) Fits(r *Rule) bool {
	return e.typ == r.Type && e.slots.Holds(&r.Spec)
}

// Keys is the number of keys tracked: in-flight slots, the local share,
// leases and remembered refusals.
func (e *Engine) Keys() int64 {
	return e.slots.Keys() + e.fallback.Keys() + e.keys.Keys()
}

// LeaseKeys is the number of keys holding a lease or a remembered
// refusal.
func (e *Engine) LeaseKeys() int64 { return e.keys.Keys() }

// InFlight is the number of admitted requests not finished yet.
func (e *Engine) InFlight() int64 { return e.slots.InFlight() }

// Release frees the in-flight slot of an admitted request.
func (e *Engine) Release(d *engine.Decision) { e.slots.Release(d) }

// Sweep drops keys idle for idle ns (leases: LeaseHold at least).
func (e *Engine) Sweep(now, idle int64) {
	e.slots.Sweep(now, idle)
	e.fallback.Sweep(now, idle)
	if e.leased.Load() {
		idle = max(idle, LeaseHold)
	}
	e.keys.Sweep(now, idle)
}

// LeaseHold is how long an idle key keeps its lease at least. Its tokens
// were taken from Redis already: dropping them when the key's own state
// would be fresh again (the rule's idle time, e.g. 1 s for qps = burst)
// wastes them and sends the key's next request to Redis, which with many
// small keys (one per user) made most of lease mode's Redis calls. Holding
// them longer only delays when they are spent, within the bound (quota +
// lease_size × instances); max_keys still caps how many keys are held.
const LeaseHold = int64(time.Minute)

// clusterRecheck is how long an instance keeps refusing a key on what
// Redis said, at most, before asking Redis again. Other instances do not
// only spend: a response_cost refund (or a rule's reset) gives units back,
// which this instance cannot see, and Redis's wait (the rest of a day's
// window, minutes of a slow bucket) would keep refusing a key Redis
// admits. A second bounds that to a second, for one Redis call per
// refused key per second per instance.
const clusterRecheck = int64(time.Second)

// listedRecheck is how long a cluster engine keeps refusing a key of a
// listed rule on what Redis said, at most: the time for the refunds of
// the requests that were refused by a later rule to land (one Redis round
// trip, a batch), after which the key is asked again.
const listedRecheck = int64(20 * time.Millisecond)

// Take decides one request: in-flight caps locally, then the rate in Redis.
func (e *Engine) Take(r *Rule, key []byte, now int64) engine.Decision {
	return e.TakeCost(r, key, now, r.Cost)
}

// Queued is the number of requests of a paced rule waiting: those holding
// a slot reserved in Redis, and those paced locally while Redis fails.
func (e *Engine) Queued() int64 { return e.slots.Queued().Load() + e.fallback.Queued().Load() }

// TakeCost is Take for a request of cost tokens.
func (e *Engine) TakeCost(r *Rule, key []byte, now int64, cost int64) engine.Decision {
	d := e.slots.TakeCost(&r.Spec, key, now, r.Cost)
	if !d.OK() {
		return d
	}
	if r.Flow.Behavior != engine.Reject {
		e.pace(r, key, now, &d)
	} else {
		e.decide(r, key, now, cost, &d)
	}
	if r.Calendar != nil && d.Cal == nil && !d.Unknown {
		d.Cal = r.Calendar.Window(engine.Wall(now))
	}
	if !d.OK() {
		e.slots.Release(&d)
	}
	return d
}

// decide spends a token leased earlier if this instance holds one (lease
// mode), topping the lease up in the background once it falls below half.
// Else, if Redis said it has no tokens until some time, it refuses locally
// until then, but for clusterRecheck at most (another instance's refund
// may give tokens back sooner; a changed rule forgets it). Else it asks
// Redis: for this request's cost,
// or in lease mode for a whole lease.
//
// Bound: an instance never holds more than lease_size tokens of a key, and
// every token it spends was granted by Redis. Tokens granted earlier and
// spent later are the only excess over the quota, so in any interval the
// fleet admits at most the quota plus lease_size × instances.
func (e *Engine) decide(r *Rule, key []byte, now, cost int64, d *engine.Decision) {
	if r.LeaseSize == 0 {
		e.decideExact(r, key, now, cost, d)
		return
	}
	size := cost
	if r.LeaseSize > 0 {
		size = max(min(r.LeaseSize, d.Limits.Quota), cost) // an override may be smaller
	}
	s, _, ls := e.lockLease(r, key, now)
	if ls.tokens >= cost {
		ls.tokens -= cost
		d.Remaining, d.Reset = ls.remaining+ls.tokens, max(0, ls.resetAt-now)
		var want int64
		if !ls.pending && ls.tokens*2 < size && r.LeaseSize > 0 && !ls.refusing(r, now, 1) {
			ls.pending, want = true, size-ls.tokens
		}
		s.Unlock()
		if want > 0 {
			go e.topUp(r, d.Limits, string(key), s, ls, want)
		}
		return
	}
	if ls.refusing(r, now, cost) {
		ls.refuseAsDenied(now, d)
		s.Unlock()
		return
	}
	// Only one lease call per key at a time, so the tokens held stay under
	// lease_size; meanwhile others take exactly their cost.
	leasing := !ls.pending && size > cost
	want := cost
	if leasing {
		ls.pending, want = true, size
	}
	s.Unlock()
	g, err := e.call(r, d.Limits, key, cost, want)
	s.Lock()
	if leasing {
		ls.pending = false
	}
	if err != nil {
		if ls.denied(r, now, cost) {
			ls.refuseAsDenied(now, d)
			s.Unlock()
			return
		}
		s.Unlock()
		e.Fail(r, key, now, cost, d)
		return
	}
	ls.learn(r, g, now, cost, e.host.Listed())
	if g.N >= cost {
		ls.tokens += g.N - cost
		d.Remaining = g.Remaining + ls.tokens
	} else {
		d.Reason, d.RetryAfter, d.Remaining = engine.RateLimited, g.Wait, 0
	}
	d.Reset = g.Reset
	s.Unlock()
}

// decideExact asks Redis for this request's cost, unless Redis said the key
// has no tokens until some time (then it refuses locally until then, as
// decide). Only such a refusal is kept per key: a key Redis admits needs no
// entry here, so exact mode makes none for it (no allocation, no LRU work,
// nothing for the GC to mark per key) and looks the key up once.
func (e *Engine) decideExact(r *Rule, key []byte, now, cost int64, d *engine.Decision) {
	s := e.keys.Shard(key)
	s.Lock()
	known := leaseOf(e.keys, s, key)
	if known != nil && known.refusing(r, now, cost) {
		known.refuseAsDenied(now, d)
		s.Unlock()
		return
	}
	s.Unlock()
	spend := cost
	if r.Settles {
		spend = r.Reserve // the rest is settled after the response
	}
	g, err := e.call(r, d.Limits, key, cost, spend)
	if err != nil {
		s.Lock()
		if known != nil && known.denied(r, now, cost) {
			known.refuseAsDenied(now, d)
			s.Unlock()
			return
		}
		s.Unlock()
		e.Fail(r, key, now, cost, d)
		return
	}
	// Admitted: spend granted, and cost was there before it (what is left
	// plus what was granted).
	if g.N >= spend && g.Remaining+g.N >= cost {
		d.Remaining = g.Remaining
	} else {
		d.Reason, d.RetryAfter, d.Remaining = engine.RateLimited, g.Wait, 0
	}
	d.Reset = g.Reset
	if g.Wait > 0 || known != nil {
		// Remember the refusal, or clear the one remembered.
		s, _, ls := e.lockLease(r, key, now)
		ls.learn(r, g, now, cost, e.host.Listed())
		s.Unlock()
	}
}

// lockLease locks the key's shard and returns its entry and lease state,
// made on first use. The caller unlocks s.mu.
func (e *Engine) lockLease(r *Rule, key []byte, now int64) (s *engine.Shard, i int32, ls *leaseState) {
	idle := r.Idle
	if r.LeaseSize > 0 {
		idle = max(idle, LeaseHold)
		if !e.leased.Load() {
			e.leased.Store(true)
		}
	}
	s = e.keys.Shard(key)
	s.Lock()
	i = e.keys.Find(s, key, now, idle, e.keys.PerShard(r.MaxKeys))
	return s, i, leaseAt(s, i)
}

// leaseAt is entry i's lease state in s, made on first use.
func leaseAt(s *engine.Shard, i int32) *leaseState {
	return s.Lease(i, newLeaseState).(*leaseState)
}

func newLeaseState() any { return new(leaseState) }

// leaseOf is key's lease state in the locked shard s, or nil.
func leaseOf(t *engine.Table, s *engine.Shard, key []byte) *leaseState {
	ls, _ := t.LeaseOf(s, key).(*leaseState)
	return ls
}

// refusing reports whether Redis said, under rule r, it has fewer than
// cost tokens now (it said so for requests of deniedCost: a cheaper one may
// still fit).
func (ls *leaseState) refusing(r *Rule, now, cost int64) bool {
	return ls.denied(r, now, cost) && (ls.recheckAt == 0 || now < ls.recheckAt)
}

// denied reports whether Redis's last word on the key, under rule r, was
// that it has fewer than cost until deniedUntil, recheck or not: with
// Redis unreachable, that word still stands (no refund elsewhere can be
// seen, and the local share must not admit a key Redis said is spent).
func (ls *leaseState) denied(r *Rule, now, cost int64) bool {
	return now < ls.deniedUntil && ls.deniedBy == r && cost >= ls.deniedCost
}

// refuseAsDenied refuses d on Redis's last word on the key (denied).
func (ls *leaseState) refuseAsDenied(now int64, d *engine.Decision) {
	d.Reason, d.RetryAfter = engine.RateLimited, ls.deniedUntil-now
	d.Remaining, d.Reset = 0, max(0, ls.resetAt-now)
}

// learn records what a call told about the key's quota in Redis. A wait
// of 0 (tokens left) clears a refusal: a stale now + 0 must not refuse a
// concurrent request whose clock reading came earlier. A refusal is kept
// at most clusterRecheck, or listedRecheck when the rule is one of
// several limits somewhere (listed); its Retry-After stays Redis's wait.
func (ls *leaseState) learn(r *Rule, g Grant, now, cost int64, listed bool) {
	ls.remaining, ls.resetAt = g.Remaining, now+g.Reset
	if g.Wait > 0 {
		ls.deniedUntil, ls.deniedBy, ls.deniedCost = now+g.Wait, r, cost
		keep := clusterRecheck
		if listed {
			keep = listedRecheck
		}
		ls.recheckAt = now + min(g.Wait, keep)
	} else {
		ls.deniedUntil, ls.deniedBy = 0, nil
	}
}

// topUp leases up to want more tokens for a key in the background.
func (e *Engine) topUp(r *Rule, l *engine.Limits, key string, s *engine.Shard, ls *leaseState, want int64) {
	g, err := e.call(r, l, []byte(key), 1, want)
	now := e.host.Now()
	s.Lock()
	ls.pending = false
	if err == nil {
		ls.tokens += g.N
		ls.learn(r, g, now, 1, e.host.Listed())
	}
	s.Unlock()
}

// call runs one script on Redis within the rule's redis_timeout, unless the
// gate is down, in a batch with the other decisions waiting on the client
// (batcher.go); a failure brings the gate down.
func (e *Engine) call(r *Rule, l *engine.Limits, key []byte, min, max int64) (Grant, error) {
	ref := e.host.Backend()
	if ref == nil {
		return Grant{}, errNoRedis
	}
	c := ref.B.Client()
	if c == nil {
		// Only a rule written without Redis (e.g. to the store's memory)
		// gets here: Provision refuses the others.
		if e.warnedNoRedis.CompareAndSwap(false, true) && ref.Logger != nil {
			ref.Logger.Warn("scope cluster rule but no redis configured: requests follow on_redis_error", zap.String("rule", r.ID))
		}
		return Grant{}, errNoRedis
	}
	g := ref.B.ClientState(GateKey, NewGate).(*Gate)
	if g.Down.Load() {
		return Grant{}, ErrGateDown
	}
	var rkey string
	var res Grant
	var err error
	switch fl := &r.Flow; {
	case fl.Behavior.Warms():
		rkey = RedisKeyOf(ref.B.KeyPrefix(), "wu", r.ID, key)
		res, err = g.Batch.RunWarm(rkey, math.Min(float64(min)/l.QPS, engine.MaxFlowSeconds)*1e6, fl.ColdFactor, fl.WarmUpPeriod/1000,
			fl.Tolerance(l, float64(min))/1000, r.RedisTimeout)
	case r.Calendar != nil:
		rkey, res, err = e.callCalendar(g.Batch, ref.B.KeyPrefix(), r, l, key, e.host.Now(), min, max)
	case fl.Behavior == engine.Pace:
		rkey = RedisKeyOf(ref.B.KeyPrefix(), "pc", r.ID, key)
		res, err = g.Batch.RunPace(rkey, math.Min(float64(min)/l.QPS, engine.MaxFlowSeconds)*1e6, r.Flow.MaxQueueWait/1000, r.RedisTimeout)
	default:
		rkey = RedisKey(ref.B.KeyPrefix(), e.typ, r.ID, key)
		res, err = g.Batch.Run(e.typ, rkey, l, min, max, r.RedisTimeout)
	}
	if err != nil {
		e.counters.RedisErrors.Inc()
		if Unreachable(err) {
			g.Fail(err, rkey, ref.Logger)
		} else if e.warned.CompareAndSwap(false, true) && ref.Logger != nil {
			// Redis answered, with an error about this key or script
			// (e.g. WRONGTYPE: something else wrote the key): this
			// decision takes on_redis_error, the others still use Redis.
			ref.Logger.Warn("cluster rate limit: redis refused the script; this decision follows on_redis_error",
				zap.String("rule", r.ID), zap.Error(err))
		}
		return Grant{}, err
	}
	e.counters.RedisCalls.Inc()
	return res, nil
}

// Fail decides d without Redis, by the rule's on_redis_error.
func (e *Engine) Fail(r *Rule, key []byte, now, cost int64, d *engine.Decision) {
	switch r.OnRedisError {
	case FailAllow:
		e.counters.FallbackAllow.Inc()
		d.Reason, d.Unknown = engine.Allowed, true
	case FailDeny:
		e.counters.FallbackDeny.Inc()
		d.Reason, d.Unknown = engine.RedisUnavailable, true
	default:
		e.counters.FallbackLocal.Inc()
		fd := e.fallback.TakeCost(&e.shareOf(r).Spec, key, now, cost)
		d.Reason, d.Limits = fd.Reason, fd.Limits
		d.Remaining, d.Reset, d.RetryAfter = fd.Remaining, fd.Reset, fd.RetryAfter
		d.Wait, d.Queued = fd.Wait, fd.Queued // a paced rule waits in the local pacer
	}
}

// shareOf returns r with its quota divided by the live instances, as last
// seen while Redis was up.
func (e *Engine) shareOf(r *Rule) *Rule {
	n := 1
	if ref := e.host.Backend(); ref != nil {
		n = max(1, ref.B.LiveInstances())
	}
	if s := e.share.Load(); s != nil && s.of == r && s.n == n {
		return s.rule
	}
	sr := scaleRule(r, n)
	e.share.Store(&shareRule{of: r, n: n, rule: sr})
	return sr
}

// scaleRule is r with every quota divided by n (rounded down, but never
// below requested_tokens) and no in-flight caps (the cluster engine applies
// those).
func scaleRule(r *Rule, n int) *Rule {
	c := *r
	c.MaxConcurrent, c.MaxConcurrentTotal = 0, 0
	c.Limits = scaleLimits(r, &r.Limits, n)
	if len(r.Overrides) > 0 {
		c.Overrides = make(map[string]*engine.Limits, len(r.Overrides))
		for k, l := range r.Overrides {
			sl := scaleLimits(r, l, n)
			c.Overrides[k] = &sl
		}
	}
	// A paced share spaces requests n times further apart: its schedule
	// stays ahead of the clock for longer, so its keys must too.
	c.Idle = max(r.Idle, c.Flow.Idle(&c.Spec))
	return &c
}

func scaleLimits(r *Rule, l *engine.Limits, n int) engine.Limits {
	s := *l
	f := float64(n)
	cost := float64(r.Cost)
	s.QPS = l.QPS / f
	if r.Type == engine.SlidingWindow || r.Type == engine.Calendar {
		s.Max = max(cost, math.Floor(l.Max/f))
		s.Quota = int64(s.Max)
	} else {
		s.Burst = max(cost, math.Floor(l.Burst/f))
		s.Quota = int64(s.Burst)
		s.WindowSecs = int64(math.Ceil(s.Burst / s.QPS))
	}
	if r.Flow.Behavior.Warms() {
		s.Warm = engine.NewWarmModel(s.QPS, r.Flow.ColdFactor, r.Flow.WarmUpPeriod)
	}
	s.Advertise(r.ID)
	s.BoxScriptArgs(r.Type)
	return s
}
