package ratelimit

import (
	"context"
	"errors"
	"math"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
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
}

type backendRef struct {
	b      Backend
	logger *zap.Logger
}

var errNoRedis = errors.New("no redis configured")

// clusterEngine keeps a rule's counters in Redis (scope cluster), so every
// instance spends one quota. In-flight caps stay per instance. With a lease
// size, each instance takes blocks of tokens from Redis and spends them
// locally, topping up in the background before they run out; see
// takeLeased for the over-admission bound. While Redis fails, decisions
// follow the rule's on_redis_error.
type clusterEngine struct {
	typ      LimitType
	lim      *limiter     // its backend and counters
	slots    *localEngine // in-flight caps
	leases   *table       // lease mode: tokens held per key; nil otherwise
	fallback *localEngine // on_redis_error local: this instance's share
	share    atomic.Pointer[shareRule]
	warned   atomic.Bool // a reply error was logged
}

// shareRule caches rule `of` scaled down to 1/n of its quota.
type shareRule struct {
	of   *Rule
	n    int
	rule *Rule
}

// leaseState is one key's lease: tokens taken from Redis, not spent yet.
type leaseState struct {
	tokens      int64
	remaining   int64 // what Redis had left at the last lease
	resetAt     int64 // ns (local clock): quota whole again, per the last lease
	deniedUntil int64 // ns: Redis refused until then, so refuse locally
	pending     bool  // a lease call is in flight
}

func newClusterEngine(r *Rule, lim *limiter) *clusterEngine {
	e := &clusterEngine{
		typ:      r.Type,
		lim:      lim,
		slots:    &localEngine{tab: newTable(shardsFor(r.MaxKeys)), typ: r.Type, slotsOnly: true},
		fallback: newLocalEngine(r),
	}
	if r.LeaseSize > 0 {
		e.leases = newTable(shardsFor(r.MaxKeys))
	}
	return e
}

// fits reports whether e can serve rule r without losing state.
func (e *clusterEngine) fits(r *Rule) bool {
	return r.Cluster() && e.typ == r.Type && (e.leases != nil) == (r.LeaseSize > 0) &&
		len(e.slots.tab.shards) == shardsFor(r.MaxKeys)
}

func (e *clusterEngine) Keys() int64 {
	n := e.slots.Keys() + e.fallback.Keys()
	if e.leases != nil {
		n += e.leases.keys.Load()
	}
	return n
}

func (e *clusterEngine) InFlight() int64 { return e.slots.InFlight() }

func (e *clusterEngine) Release(d *Decision) { e.slots.Release(d) }

func (e *clusterEngine) sweep(now, idle int64) {
	e.slots.sweep(now, idle)
	e.fallback.sweep(now, idle)
	if e.leases != nil {
		e.leases.sweep(now, idle)
	}
}

// Take decides one request: in-flight caps locally, then the rate in Redis.
func (e *clusterEngine) Take(r *Rule, key []byte, now int64) Decision {
	d := e.slots.Take(r, key, now)
	if !d.OK() {
		return d
	}
	if e.leases != nil {
		e.takeLeased(r, key, now, &d)
	} else if g, err := e.call(r, d.Limits, key, r.Cost, r.Cost); err != nil {
		e.fail(r, key, now, &d)
	} else {
		if g.n < r.Cost {
			d.Reason, d.RetryAfter = RateLimited, g.wait
		}
		d.Remaining, d.Reset = g.remaining, g.reset
	}
	if !d.OK() {
		e.slots.Release(&d)
	}
	return d
}

// takeLeased spends a token leased earlier if this instance holds one, and
// tops the lease up in the background once it falls below half; without
// one, it leases synchronously (one Redis call, as without leases).
//
// Bound: an instance never holds more than lease_size tokens of a key, and
// every token it spends was granted by Redis. Tokens granted earlier and
// spent later are the only excess over the quota, so in any interval the
// fleet admits at most the quota plus lease_size × instances.
func (e *clusterEngine) takeLeased(r *Rule, key []byte, now int64, d *Decision) {
	cost := r.Cost
	size := max(min(r.LeaseSize, d.Limits.quota), cost) // an override may be smaller
	s := e.leases.shard(key)
	s.mu.Lock()
	ent := e.leases.get(s, key, now, r.idle, max(1, r.MaxKeys/len(e.leases.shards)))
	ls := ent.lease
	if ls == nil {
		ls = new(leaseState)
		ent.lease = ls
	}
	if ls.tokens >= cost {
		ls.tokens -= cost
		d.Remaining, d.Reset = ls.remaining+ls.tokens, max(0, ls.resetAt-now)
		var want int64
		if !ls.pending && ls.tokens*2 < size && now >= ls.deniedUntil {
			ls.pending, want = true, size-ls.tokens
		}
		s.mu.Unlock()
		if want > 0 {
			go e.topUp(r, d.Limits, ent.key, s, ls, want)
		}
		return
	}
	if now < ls.deniedUntil {
		d.Reason, d.RetryAfter = RateLimited, ls.deniedUntil-now
		d.Remaining, d.Reset = 0, max(0, ls.resetAt-now)
		s.mu.Unlock()
		return
	}
	// Only one lease call per key at a time, so the tokens held stay under
	// lease_size; meanwhile others take exactly their cost.
	leasing := !ls.pending
	want := cost
	if leasing {
		ls.pending, want = true, size
	}
	s.mu.Unlock()
	g, err := e.call(r, d.Limits, key, cost, want)
	s.mu.Lock()
	if leasing {
		ls.pending = false
	}
	if err != nil {
		s.mu.Unlock()
		e.fail(r, key, now, d)
		return
	}
	// Redis has fewer than cost tokens until now + wait: refuse locally
	// until then once the lease is spent.
	ls.remaining, ls.resetAt, ls.deniedUntil = g.remaining, now+g.reset, now+g.wait
	if g.n >= cost {
		ls.tokens += g.n - cost
		d.Remaining = g.remaining + ls.tokens
	} else {
		d.Reason, d.RetryAfter, d.Remaining = RateLimited, g.wait, 0
	}
	d.Reset = g.reset
	s.mu.Unlock()
}

// topUp leases up to want more tokens for a key in the background.
func (e *clusterEngine) topUp(r *Rule, l *Limits, key string, s *shard, ls *leaseState, want int64) {
	g, err := e.call(r, l, []byte(key), 1, want)
	now := e.lim.now()
	s.mu.Lock()
	ls.pending = false
	if err == nil {
		ls.tokens += g.n
		ls.remaining, ls.resetAt, ls.deniedUntil = g.remaining, now+g.reset, now+g.wait
	}
	s.mu.Unlock()
}

// call runs one script on Redis within the rule's redis_timeout, unless the
// gate is down; a failure brings the gate down.
func (e *clusterEngine) call(r *Rule, l *Limits, key []byte, min, max int64) (grant, error) {
	ref := e.lim.backend.Load()
	if ref == nil {
		return grant{}, errNoRedis
	}
	c := ref.b.Client()
	if c == nil {
		return grant{}, errNoRedis
	}
	g := gateFor(c)
	if g.down.Load() {
		return grant{}, errGateDown
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.RedisTimeout)
	res, err := runScript(ctx, c, e.typ, redisKey(ref.b.KeyPrefix(), e.typ, r.ID, key), l, min, max)
	cancel()
	if err != nil {
		e.lim.counters.redisErrors.Inc()
		if unreachable(err) {
			g.fail(err, ref.logger)
		} else if e.warned.CompareAndSwap(false, true) && ref.logger != nil {
			// Redis answered, with an error about this key or script
			// (e.g. WRONGTYPE: something else wrote the key): this
			// decision takes on_redis_error, the others still use Redis.
			ref.logger.Warn("cluster rate limit: redis refused the script; this decision follows on_redis_error",
				zap.String("rule", r.ID), zap.Error(err))
		}
		return grant{}, err
	}
	e.lim.counters.redisCalls.Inc()
	return res, nil
}

var errGateDown = errors.New("redis marked unreachable")

// unreachable tells a Redis that cannot serve (connection refused or lost,
// timeout, loading, failover, cluster down) from a reply error about one
// command, which says nothing about the others.
func unreachable(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err)
}

// fail decides d without Redis, by the rule's on_redis_error.
func (e *clusterEngine) fail(r *Rule, key []byte, now int64, d *Decision) {
	switch r.OnRedisError {
	case FailAllow:
		e.lim.counters.fallbackAllow.Inc()
		d.Reason, d.Unknown = Allowed, true
	case FailDeny:
		e.lim.counters.fallbackDeny.Inc()
		d.Reason, d.Unknown = RedisUnavailable, true
	default:
		e.lim.counters.fallbackLocal.Inc()
		fd := e.fallback.Take(e.shareOf(r), key, now)
		d.Reason, d.Limits = fd.Reason, fd.Limits
		d.Remaining, d.Reset, d.RetryAfter = fd.Remaining, fd.Reset, fd.RetryAfter
	}
}

// shareOf returns r with its quota divided by the live instances, as last
// seen while Redis was up.
func (e *clusterEngine) shareOf(r *Rule) *Rule {
	n := 1
	if ref := e.lim.backend.Load(); ref != nil {
		n = max(1, ref.b.LiveInstances())
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
		c.Overrides = make(map[string]*Limits, len(r.Overrides))
		for k, l := range r.Overrides {
			sl := scaleLimits(r, l, n)
			c.Overrides[k] = &sl
		}
	}
	return &c
}

func scaleLimits(r *Rule, l *Limits, n int) Limits {
	s := *l
	f := float64(n)
	cost := float64(r.Cost)
	s.QPS = l.QPS / f
	if r.Type == SlidingWindow {
		s.Max = max(cost, math.Floor(l.Max/f))
		s.quota = int64(s.Max)
	} else {
		s.Burst = max(cost, math.Floor(l.Burst/f))
		s.quota = int64(s.Burst)
		s.window = int64(math.Ceil(s.Burst / s.QPS))
	}
	s.advertise(r.ID)
	return s
}
