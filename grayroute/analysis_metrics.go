package grayroute

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/internal/metrickit"
)

// Canary analysis metrics, per rule and version (target or fallback). Like
// the routing counters they live for the process, so reloads keep them;
// they are updated once per interval, never on the request path.
var analysisMetrics = struct {
	once      sync.Once
	requests  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	latency   *prometheus.GaugeVec
	evidence  *prometheus.GaugeVec
	intervals *prometheus.CounterVec
	missed    *prometheus.CounterVec
}{}

func initAnalysisMetrics(reg *prometheus.Registry) error {
	m := &analysisMetrics
	m.once.Do(func() {
		opts := func(name, help string) prometheus.Opts {
			return prometheus.Opts{Namespace: "sluice", Subsystem: "grayroute_analysis", Name: name, Help: help}
		}
		m.requests = prometheus.NewCounterVec(prometheus.CounterOpts(opts("requests_total",
			"Requests counted by the canary analysis (this instance), by rule and version.")), []string{"rule", "version"})
		m.errors = prometheus.NewCounterVec(prometheus.CounterOpts(opts("errors_total",
			"Errors (5xx, proxy errors) counted by the canary analysis (this instance), by rule and version.")), []string{"rule", "version"})
		m.latency = prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("latency_seconds",
			"The compared latency percentile over the canary so far (fleet totals with Redis), by rule and version.")), []string{"rule", "version"})
		m.evidence = prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("evidence",
			"Log likelihood ratio of harm, by rule and test (errors, latency); the canary fails at log(2/0.01).")), []string{"rule", "test"})
		m.intervals = prometheus.NewCounterVec(prometheus.CounterOpts(opts("intervals_total",
			"Analysis intervals judged, by rule and outcome (healthy, inconclusive, failing).")), []string{"rule", "outcome"})
		m.missed = prometheus.NewCounterVec(prometheus.CounterOpts(opts("missed_writes_total",
			"Writes of this instance's counts to Redis that failed, by rule; each is tried again until it lands or a later write replaces it.")), []string{"rule"})
	})
	return metrickit.Register(reg, m.requests, m.errors, m.latency, m.evidence, m.intervals, m.missed)
}

// observeCounts adds this instance's interval counts to the counters.
func observeCounts(c *canary, n *IntervalCounts) {
	m := &analysisMetrics
	m.requests.WithLabelValues(c.rule, c.target).Add(float64(n.Canary.Requests))
	m.errors.WithLabelValues(c.rule, c.target).Add(float64(n.Canary.Errors))
	m.requests.WithLabelValues(c.rule, c.fallback).Add(float64(n.Baseline.Requests))
	m.errors.WithLabelValues(c.rule, c.fallback).Add(float64(n.Baseline.Errors))
}

// observeVerdict records an interval's verdict.
func observeVerdict(c *canary, rep *IntervalReport) {
	m := &analysisMetrics
	m.latency.WithLabelValues(c.rule, c.target).Set(rep.CanaryLatency)
	m.latency.WithLabelValues(c.rule, c.fallback).Set(rep.BaselineLatency)
	m.evidence.WithLabelValues(c.rule, "errors").Set(rep.ErrorEvidence)
	m.evidence.WithLabelValues(c.rule, "latency").Set(rep.LatencyEvidence)
	m.intervals.WithLabelValues(c.rule, rep.Outcome).Inc()
}
