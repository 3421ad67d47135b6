package ratelimit

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
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
var metrics = struct {
	once      sync.Once
	requests  *prometheus.CounterVec
	redis     *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
	gauges    gaugeCollector
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
		metrics.redis = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "ratelimit", Name: "redis_calls_total",
			Help: "Redis script runs of cluster rate limits by rule and result (ok, error).",
		}, []string{"rule", "result"})
		metrics.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "ratelimit", Name: "redis_fallback_total",
			Help: "Cluster rate limit decisions made without Redis, by rule and on_redis_error mode.",
		}, []string{"rule", "mode"})
	})
	if reg == nil {
		return
	}
	for _, c := range []prometheus.Collector{metrics.requests, metrics.redis, metrics.fallbacks, transitions, queueWaitHist, &metrics.gauges} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	}
}

// ruleCounters are one rule's counters, looked up once per rule id so the
// request path only adds to them.
type ruleCounters struct {
	allowed, rejected, shadow, concurrency, emptyKey, unavailable prometheus.Counter
	redisCalls, redisErrors                                       prometheus.Counter
	fallbackAllow, fallbackDeny, fallbackLocal                    prometheus.Counter
}

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

		redisCalls:    metrics.redis.WithLabelValues(rule, "ok"),
		redisErrors:   metrics.redis.WithLabelValues(rule, "error"),
		fallbackAllow: metrics.fallbacks.WithLabelValues(rule, "allow"),
		fallbackDeny:  metrics.fallbacks.WithLabelValues(rule, "deny"),
		fallbackLocal: metrics.fallbacks.WithLabelValues(rule, "local"),
	}
}

// dropCounters forgets a rule's series once no config uses the rule, so
// edited inline rules do not pile up label values.
func dropCounters(rule string) {
	metrics.requests.DeletePartialMatch(prometheus.Labels{"rule": rule})
	metrics.redis.DeletePartialMatch(prometheus.Labels{"rule": rule})
	metrics.fallbacks.DeletePartialMatch(prometheus.Labels{"rule": rule})
}

// gaugeCollector reports the live limiters' key and in-flight counts when
// scraped, so the request path does no gauge bookkeeping.
type gaugeCollector struct{}

var (
	keysDesc = prometheus.NewDesc("sluice_ratelimit_keys",
		"Keys whose rate limit state is tracked, by rule.", []string{"rule"}, nil)
	inFlightDesc = prometheus.NewDesc("sluice_ratelimit_in_flight",
		"Requests admitted by a rule with a concurrency cap and not finished yet.", []string{"rule"}, nil)

	liveMu sync.Mutex
	live   = map[*limiter]struct{}{}
)

func registerLimiter(l *limiter) {
	liveMu.Lock()
	live[l] = struct{}{}
	liveMu.Unlock()
}

func unregisterLimiter(l *limiter) {
	liveMu.Lock()
	delete(live, l)
	liveMu.Unlock()
}

func (*gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- keysDesc
	ch <- inFlightDesc
	describeFlow(ch)
}

func (*gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	liveMu.Lock()
	defer liveMu.Unlock()
	for l := range live {
		s := l.state.Load()
		if s == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(s.engine.Keys()), l.id)
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(s.engine.InFlight()), l.id)
		collectFlow(ch, l, s.engine)
	}
}
