package ratelimit

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/rulestore"
)

// Metrics, registered on each config's registry (ctx.GetMetricsRegistry):
//
//	sluice_ratelimit_requests_total{rule,result}  result: allowed, rejected,
//	    shadow_rejected, concurrency_rejected, empty_key_rejected
//	sluice_ratelimit_keys{rule}       keys tracked now
//	sluice_ratelimit_in_flight{rule}  requests admitted and not finished
//	    (counted for rules with max_concurrent or max_concurrent_total)
//	sluice_ratelimit_redis_calls_total{rule,result}  scope cluster: Redis
//	    script runs, result ok or error
//	sluice_ratelimit_redis_fallback_total{rule,mode}  scope cluster:
//	    decisions made without Redis, by on_redis_error mode
//	sluice_ratelimit_redis_transitions_total{to}  health gate: down, up
//
// A rule's requests_total series exist, at 0, from the provisioning of a
// handler naming it, so alerts may use absent(). The two Redis series per
// rule are exported only for scope cluster rules (from provisioning too,
// when the rule is known then), never for local ones.
var metrics = struct {
	once     sync.Once
	requests *prometheus.CounterVec
	gauges   gaugeCollector
}{}

var transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "sluice", Subsystem: "ratelimit", Name: "redis_transitions_total",
	Help: "Transitions of the Redis health gate of cluster rate limits (to down or up).",
}, []string{"to"})

func initMetrics(reg *prometheus.Registry) {
	metrics.once.Do(func() {
		metrics.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "ratelimit", Name: "requests_total",
			Help: "Rate limit decisions by rule and result.",
		}, []string{"rule", "result"})
	})
	if reg == nil {
		return
	}
	for _, c := range []prometheus.Collector{metrics.requests, transitions, queueWaitHist, &metrics.gauges} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	}
}

// ruleCounters are one rule's counters, looked up once per rule id so the
// request path only adds to them. The Redis ones are plain atomics that the
// collector exports for scope cluster rules only.
type ruleCounters struct {
	allowed, rejected, shadow, concurrency, emptyKey, unavailable prometheus.Counter
	redisCalls, redisErrors                                       *counter
	fallbackAllow, fallbackDeny, fallbackLocal                    *counter
}

// counter is a count the collector exports.
type counter struct{ n atomic.Uint64 }

func (c *counter) Inc()           { c.n.Add(1) }
func (c *counter) value() float64 { return float64(c.n.Load()) }

func countersFor(rule string) *ruleCounters {
	initMetrics(nil)
	c := metrics.requests
	return &ruleCounters{
		allowed:     c.WithLabelValues(rule, "allowed"),
		rejected:    c.WithLabelValues(rule, "rejected"),
		shadow:      c.WithLabelValues(rule, "shadow_rejected"),
		concurrency: c.WithLabelValues(rule, "concurrency_rejected"),
		emptyKey:    c.WithLabelValues(rule, "empty_key_rejected"),
		unavailable: c.WithLabelValues(rule, "redis_unavailable"),

		redisCalls: new(counter), redisErrors: new(counter),
		fallbackAllow: new(counter), fallbackDeny: new(counter), fallbackLocal: new(counter),
	}
}

// usedRedis reports whether any Redis count is above 0, so a rule edited
// from cluster to local keeps its (monotonic) Redis series.
func (c *ruleCounters) usedRedis() bool {
	return c.redisCalls.n.Load()|c.redisErrors.n.Load()|c.fallbackAllow.n.Load()|c.fallbackDeny.n.Load()|c.fallbackLocal.n.Load() != 0
}

// dropCounters forgets a rule's series once no config uses the rule, so
// edited inline rules do not pile up label values. (The Redis series go
// with the limiter, which the collector no longer sees.)
func dropCounters(rule string) {
	metrics.requests.DeletePartialMatch(prometheus.Labels{"rule": rule})
}

// gaugeCollector reports the live limiters' key and in-flight counts when
// scraped, so the request path does no gauge bookkeeping.
type gaugeCollector struct{}

var (
	keysDesc = prometheus.NewDesc("sluice_ratelimit_keys",
		"Keys whose rate limit state is tracked, by rule.", []string{"rule"}, nil)
	inFlightDesc = prometheus.NewDesc("sluice_ratelimit_in_flight",
		"Requests admitted by a rule with a concurrency cap and not finished yet.", []string{"rule"}, nil)
	redisCallsDesc = prometheus.NewDesc("sluice_ratelimit_redis_calls_total",
		"Redis script runs of cluster rate limits by rule and result (ok, error).", []string{"rule", "result"}, nil)
	fallbackDesc = prometheus.NewDesc("sluice_ratelimit_redis_fallback_total",
		"Cluster rate limit decisions made without Redis, by rule and on_redis_error mode.", []string{"rule", "mode"}, nil)
)

func (*gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- keysDesc
	ch <- inFlightDesc
	ch <- redisCallsDesc
	ch <- fallbackDesc
	describeFlow(ch)
}

func (*gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	limiters.Range(func(_ string, l *limiter) bool {
		var keys, inFlight int64
		s := l.state.Load()
		if s != nil {
			keys, inFlight = s.engine.Keys(), s.engine.InFlight()
		}
		// Before the first request there is no engine yet: 0, so the
		// series exist from provisioning.
		ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(keys), l.id)
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(inFlight), l.id)
		if c := l.counters; c.usedRedis() || clusterScope(l, s) {
			for _, m := range [...]struct {
				d     *prometheus.Desc
				c     *counter
				label string
			}{
				{redisCallsDesc, c.redisCalls, "ok"}, {redisCallsDesc, c.redisErrors, "error"},
				{fallbackDesc, c.fallbackAllow, "allow"}, {fallbackDesc, c.fallbackDeny, "deny"},
				{fallbackDesc, c.fallbackLocal, "local"},
			} {
				ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, m.c.value(), l.id, m.label)
			}
		}
		if s != nil {
			collectFlow(ch, l, s.engine)
		}
		return true
	})
}

// clusterScope reports whether the limiter's rule is scope cluster: the
// rule in use, else (no request yet) the inline rule or the store's rule.
func clusterScope(l *limiter, s *limiterState) bool {
	if s != nil {
		return s.rule.Cluster()
	}
	l.mu.Lock()
	inline := l.inline
	l.mu.Unlock()
	if inline != nil {
		return inline.Cluster()
	}
	ref := l.backend.Load()
	if ref == nil {
		return false
	}
	store, ok := ref.b.(interface {
		Lookup(rulestore.Kind, string) *rulestore.Rule
	})
	if !ok {
		return false
	}
	if rr := store.Lookup(rulestore.RateLimit, l.id); rr != nil {
		r, _ := rr.Value.(*Rule)
		return r != nil && r.Cluster()
	}
	return false
}
