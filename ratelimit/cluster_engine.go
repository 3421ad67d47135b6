package ratelimit

import "github.com/sluicegw/sluice/ratelimit/cluster"

// Backend is where a cluster engine finds Redis (ratelimit/cluster holds
// it): the rule store app (*rulestore.App) in Caddy, anything else in
// tests.
type Backend = cluster.Backend

// clusterEngine is the engine of a scope cluster rule (cluster.Engine)
// taking the handler's rule: the engine reads the rule's cluster.Rule.
type clusterEngine struct{ *cluster.Engine }

func newClusterEngine(r *Rule, l *limiter) *clusterEngine {
	c := l.counters
	return &clusterEngine{cluster.NewEngine(&r.Rule, l, cluster.Counters{
		RedisCalls: c.redisCalls, RedisErrors: c.redisErrors,
		FallbackAllow: c.fallbackAllow, FallbackDeny: c.fallbackDeny, FallbackLocal: c.fallbackLocal,
	})}
}

// fits reports whether e can serve rule r without losing state.
func (e *clusterEngine) fits(r *Rule) bool { return r.Cluster() && e.Fits(&r.Rule) }

// Take decides one request: in-flight caps locally, then the rate in Redis.
func (e *clusterEngine) Take(r *Rule, key []byte, now int64) Decision {
	return e.Engine.Take(&r.Rule, key, now)
}

// take is Take for a request of cost tokens.
func (e *clusterEngine) take(r *Rule, key []byte, now int64, cost int64) Decision {
	return e.TakeCost(&r.Rule, key, now, cost)
}

// settle charges n tokens to key's state in Redis (cluster.Engine.Settle).
func (e *clusterEngine) settle(r *Rule, key []byte, now, n int64) (applied, debt bool) {
	return e.Settle(&r.Rule, key, now, n)
}

func (e *clusterEngine) sweep(now, idle int64) { e.Sweep(now, idle) }

// The limiter is its cluster engine's host (cluster.Host).

func (l *limiter) Now() int64                   { return l.now() }
func (l *limiter) Backend() *cluster.BackendRef { return l.backend.Load() }
func (l *limiter) Listed() bool                 { return l.listed.Load() }
