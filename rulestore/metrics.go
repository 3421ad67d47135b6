package rulestore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/internal/metrickit"
	"github.com/sluicegw/sluice/rulestore/status"
)

// Metrics, read from the store at scrape time:
//
//	sluice_rulestore_rules{kind,source}             rules in force
//	sluice_rulestore_redis_connected                1 while following Redis
//	sluice_rulestore_resyncs_total                  full resyncs done
//	sluice_rulestore_updates_total                  rule changes applied from Redis
//	sluice_rulestore_rejected_total                 bad rules rejected
//	sluice_rulestore_last_resync_timestamp_seconds  time of the last full resync
//	sluice_rulestore_admin_writes_total{kind,op,result}  writes through the admin API
//	sluice_rulestore_propagation_delay_seconds      admin API write to applied here
//	sluice_rules_invalid{kind}                      rule ids rejected (last version in Redis invalid) or missing (referenced, not held)
var (
	descRules      = prometheus.NewDesc("sluice_rulestore_rules", "Rules in force, by kind and source.", []string{"kind", "source"}, nil)
	descConnected  = prometheus.NewDesc("sluice_rulestore_redis_connected", "1 while the store follows Redis, 0 otherwise.", nil, nil)
	descResyncs    = prometheus.NewDesc("sluice_rulestore_resyncs_total", "Full resyncs with Redis.", nil, nil)
	descUpdates    = prometheus.NewDesc("sluice_rulestore_updates_total", "Rule changes applied from Redis (upserts and deletes).", nil, nil)
	descRejected   = prometheus.NewDesc("sluice_rulestore_rejected_total", "Rules from Redis rejected as invalid.", nil, nil)
	descLastResync = prometheus.NewDesc("sluice_rulestore_last_resync_timestamp_seconds", "Unix time of the last full resync.", nil, nil)
	descInvalid    = prometheus.NewDesc("sluice_rules_invalid", "Rule ids rejected (the last version written is invalid; the last good one, if any, stays in force) or missing (a handler refers to them, the store holds none), by kind.", []string{"kind"}, nil)
)

// Process-wide collectors: they outlive configs, so a reload neither
// resets nor drops them; every config registers them on its registry.
var (
	adminWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "rulestore", Name: "admin_writes_total",
		Help: "Rule writes through the admin API, by kind, op (upsert, delete) and result (ok, invalid, not_found, redis_error).",
	}, []string{"kind", "op", "result"})
	propagationDelay = &status.Propagation{Histogram: prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "sluice", Subsystem: "rulestore", Name: "propagation_delay_seconds",
		Help: "Time from a rule's write through the admin API (published_at in its change-log entry) " +
			"to this instance applying it. Includes clock skew between instances.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})}
)

type storeCollector struct{ app *App }

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRules, descConnected, descResyncs, descUpdates, descRejected, descLastResync, descInvalid} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.app
	invalid := map[string]int{}
	for _, r := range a.Invalid() {
		invalid[r.Kind]++
	}
	for _, k := range Kinds() {
		ch <- prometheus.MustNewConstMetric(descInvalid, prometheus.GaugeValue, float64(invalid[k.String()]), k.String())
		ch <- prometheus.MustNewConstMetric(descRules, prometheus.GaugeValue, float64(len(ByKind(a.static, k))), k.String(), "static")
		ch <- prometheus.MustNewConstMetric(descRules, prometheus.GaugeValue, float64(len(a.overlayLayer().Of(k))), k.String(), a.WritesTo())
	}
	if a.redis == nil {
		return
	}
	st := a.redis.Connection()
	connected := 0.0
	if st.Connected {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, connected)
	ch <- prometheus.MustNewConstMetric(descResyncs, prometheus.CounterValue, float64(st.Resyncs))
	ch <- prometheus.MustNewConstMetric(descUpdates, prometheus.CounterValue, float64(st.Updates))
	ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, float64(st.Rejected))
	if !st.LastResync.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLastResync, prometheus.GaugeValue, float64(st.LastResync.UnixNano())/1e9)
	}
}

// registerMetrics adds the store's collector to this config's registry.
func (a *App) registerMetrics(reg *prometheus.Registry) error {
	return metrickit.Register(reg, storeCollector{a}, adminWrites, propagationDelay)
}

// ObservePropagation records the delay of one admin API write, from its
// publish to this instance applying it (the propagation_delay_seconds
// histogram and the status page's totals).
func ObservePropagation(seconds float64) { propagationDelay.Observe(seconds) }
