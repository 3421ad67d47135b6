package ratelimit

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/internal/metrickit"
	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/rulestore"
)

// Metrics, registered on each config's registry (ctx.GetMetricsRegistry):
//
//	sluice_ratelimit_requests_total{rule,result}  result: allowed, rejected,
//	    shadow_rejected, concurrency_rejected, empty_key_rejected,
//	    redis_unavailable, bad_cost, tagged, demoted (over_limit)
//	sluice_ratelimit_keys{rule}       keys tracked now
//	sluice_ratelimit_in_flight{rule}  requests admitted and not finished
//	    (counted for rules with max_concurrent or max_concurrent_total)
//	sluice_ratelimit_redis_calls_total{rule,result}  scope cluster: Redis
//	    script runs, result ok or error
//	sluice_ratelimit_redis_fallback_total{rule,mode}  scope cluster:
//	    decisions made without Redis, by on_redis_error mode
//	sluice_ratelimit_redis_transitions_total{to}  health gate: down, up
//	sluice_ratelimit_cost_tokens_total{rule,kind}  settling rules
//	    (count_status, response_cost): tokens settled after the response
//	    beyond what admission spent, kind charged or refunded
//	sluice_ratelimit_debt_entered_total{rule}  settling rules: settlements
//	    that took a key into debt (cluster: Redis's answer to this
//	    instance's settlements)
//	sluice_ratelimit_debt_keys{rule}    settling local rules: keys in debt
//	    now, read from the key table at scrape
//	sluice_ratelimit_debt_tokens{rule}  settling local rules: the tokens
//	    (requests, units) those keys owe
//
// A rule's requests_total series exist, at 0, from the provisioning of a
// handler naming it, so alerts may use absent(). The two Redis series per
// rule are exported only for scope cluster rules (from provisioning too,
// when the rule is known then), never for local ones; the settlement
// series only for rules that settle, the debt gauges only for local ones
// (a cluster rule's debt is in Redis, not read at scrape).
//
// metrics is the one collector of the rules' series, registered once per
// registry; it reads the live limiters when scraped.
var metrics collector

// registerMetrics registers the collectors on a config's registry.
func registerMetrics(reg *prometheus.Registry) error {
	return metrickit.Register(reg, &metrics, cluster.Transitions, queueWaitHist)
}

// ruleCounters are one rule's counters, owned by its limiter: the request
// path adds to them with one atomic, the collector exports them and the
// state endpoint reads them. The Redis ones are exported for scope cluster
// rules only.
type ruleCounters struct {
	allowed, rejected, shadow, concurrency, emptyKey, unavailable, badCost counter
	debtEntered                                                            counter // settling rules (debt.go)
	tagged, demoted                                                        counter // let through over the limit (overlimit.go)
	// charged, refunded: every settlement adds to one, from every core.
	charged, refunded                          metrickit.StripedCounter
	redisCalls, redisErrors                    *counter
	fallbackAllow, fallbackDeny, fallbackLocal *counter
}

// settled adds charged and refunded tokens to stripe i.
func (c *ruleCounters) settled(i int, charged, refunded uint64) {
	c.charged.Add(i, charged)
	c.refunded.Add(i, refunded)
}

// counter is a count the collector exports: the one counter of the three
// handlers.
type counter = metrickit.Counter

func countersFor(string) *ruleCounters {
	return &ruleCounters{
		redisCalls: new(counter), redisErrors: new(counter),
		fallbackAllow: new(counter), fallbackDeny: new(counter), fallbackLocal: new(counter),
	}
}

// results calls fn with each sluice_ratelimit_requests_total result and
// its count.
func (c *ruleCounters) results(fn func(result string, n *counter)) {
	fn("allowed", &c.allowed)
	fn("rejected", &c.rejected)
	fn("shadow_rejected", &c.shadow)
	fn("concurrency_rejected", &c.concurrency)
	fn("empty_key_rejected", &c.emptyKey)
	fn("redis_unavailable", &c.unavailable)
	fn("bad_cost", &c.badCost)
	fn("tagged", &c.tagged)
	fn("demoted", &c.demoted)
}

// byResult are the rule's decisions by result.
func (c *ruleCounters) byResult() map[string]int64 {
	out := make(map[string]int64, 7)
	c.results(func(result string, n *counter) { out[result] = int64(n.Load()) })
	return out
}

// usedRedis reports whether any Redis count is above 0, so a rule edited
// from cluster to local keeps its (monotonic) Redis series.
func (c *ruleCounters) usedRedis() bool {
	return c.redisCalls.Load()|c.redisErrors.Load()|c.fallbackAllow.Load()|c.fallbackDeny.Load()|c.fallbackLocal.Load() != 0
}

// collector reports the live limiters' counters, key and in-flight counts
// when scraped, so the request path does no metric bookkeeping.
type collector struct{}

var (
	requestsDesc = prometheus.NewDesc("sluice_ratelimit_requests_total",
		"Rate limit decisions by rule and result.", []string{"rule", "result"}, nil)
	keysDesc = prometheus.NewDesc("sluice_ratelimit_keys",
		"Keys whose rate limit state is tracked, by rule.", []string{"rule"}, nil)
	inFlightDesc = prometheus.NewDesc("sluice_ratelimit_in_flight",
		"Requests admitted by a rule with a concurrency cap and not finished yet.", []string{"rule"}, nil)
	redisCallsDesc = prometheus.NewDesc("sluice_ratelimit_redis_calls_total",
		"Redis script runs of cluster rate limits by rule and result (ok, error).", []string{"rule", "result"}, nil)
	fallbackDesc = prometheus.NewDesc("sluice_ratelimit_redis_fallback_total",
		"Cluster rate limit decisions made without Redis, by rule and on_redis_error mode.", []string{"rule", "mode"}, nil)
	costTokensDesc = prometheus.NewDesc("sluice_ratelimit_cost_tokens_total",
		"Tokens settled after the response beyond what admission spent, by rule and kind (charged, refunded).", []string{"rule", "kind"}, nil)
	debtEnteredDesc = prometheus.NewDesc("sluice_ratelimit_debt_entered_total",
		"Settlements that took a key into debt, by rule.", []string{"rule"}, nil)
	debtKeysDesc = prometheus.NewDesc("sluice_ratelimit_debt_keys",
		"Keys in debt now, by local rule.", []string{"rule"}, nil)
	debtTokensDesc = prometheus.NewDesc("sluice_ratelimit_debt_tokens",
		"Tokens owed by the keys in debt now, by local rule.", []string{"rule"}, nil)
)

func (*collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- requestsDesc
	ch <- keysDesc
	ch <- inFlightDesc
	ch <- redisCallsDesc
	ch <- fallbackDesc
	ch <- costTokensDesc
	ch <- debtEnteredDesc
	ch <- debtKeysDesc
	ch <- debtTokensDesc
	describeFlow(ch)
}

func (*collector) Collect(ch chan<- prometheus.Metric) {
	limiters.Range(func(_ string, l *limiter) bool {
		l.counters.results(func(result string, n *counter) { ch <- n.Metric(requestsDesc, l.id, result) })
		var keys, inFlight int64
		s := l.state.Load()
		if s != nil {
			keys, inFlight = s.engine.Keys(), s.engine.InFlight()
		}
		// Before the first request there is no engine yet: 0, so the
		// series exist from provisioning.
		ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(keys), l.id)
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(inFlight), l.id)
		r := ruleOf(l, s)
		if c := l.counters; c.usedRedis() || (r != nil && r.Cluster()) {
			for _, m := range [...]struct {
				d     *prometheus.Desc
				c     *counter
				label string
			}{
				{redisCallsDesc, c.redisCalls, "ok"}, {redisCallsDesc, c.redisErrors, "error"},
				{fallbackDesc, c.fallbackAllow, "allow"}, {fallbackDesc, c.fallbackDeny, "deny"},
				{fallbackDesc, c.fallbackLocal, "local"},
			} {
				ch <- m.c.Metric(m.d, l.id, m.label)
			}
		}
		// A rule edited to settle no more keeps its (monotonic) settlement
		// series once it has any.
		charged, refunded := l.settledTokens()
		if charged|refunded|l.counters.debtEntered.Load() != 0 || (r != nil && r.Settles) {
			collectSettled(ch, l, s, r, charged, refunded)
		}
		if s != nil {
			collectFlow(ch, l, s.engine)
		}
		return true
	})
}

// collectSettled reports a settling rule's settlement counters and, for a
// local rule, its keys in debt read from the table now.
func collectSettled(ch chan<- prometheus.Metric, l *limiter, s *limiterState, r *Rule, charged, refunded uint64) {
	c := l.counters
	ch <- prometheus.MustNewConstMetric(costTokensDesc, prometheus.CounterValue, float64(charged), l.id, "charged")
	ch <- prometheus.MustNewConstMetric(costTokensDesc, prometheus.CounterValue, float64(refunded), l.id, "refunded")
	ch <- c.debtEntered.Metric(debtEnteredDesc, l.id)
	if r != nil && r.Cluster() {
		return
	}
	var keys int64
	var owed float64
	if s != nil {
		if e, ok := s.engine.(*localEngine); ok {
			keys, owed = e.debt(s.rule, l.now())
		}
	}
	ch <- prometheus.MustNewConstMetric(debtKeysDesc, prometheus.GaugeValue, float64(keys), l.id)
	ch <- prometheus.MustNewConstMetric(debtTokensDesc, prometheus.GaugeValue, owed, l.id)
}

// ruleOf is the limiter's rule: the rule in use, else (no request yet)
// the inline rule or the store's rule; nil when none is known.
func ruleOf(l *limiter, s *limiterState) *Rule {
	if s != nil {
		return s.rule
	}
	l.mu.Lock()
	inline := l.inline
	l.mu.Unlock()
	if inline != nil {
		return inline
	}
	ref := l.backend.Load()
	if ref == nil {
		return nil
	}
	store, ok := ref.B.(interface {
		Lookup(rulestore.Kind, string) *rulestore.Rule
	})
	if !ok {
		return nil
	}
	if rr := store.Lookup(rulestore.RateLimit, l.id); rr != nil {
		r, _ := rr.Value.(*Rule)
		return r
	}
	return nil
}
