package ratelimit

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Flow-shaping metrics:
//
//	sluice_ratelimit_queue_wait_seconds{rule}  histogram: how long paced
//	    requests waited for their slot (also those whose client left)
//	sluice_ratelimit_concurrency_limit{rule}  max_concurrent adaptive: the
//	    in-flight limit in force
//	sluice_ratelimit_min_rtt_seconds{rule}    max_concurrent adaptive: the
//	    last uncontended latency measured
var queueWaitHist = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: "sluice", Subsystem: "ratelimit", Name: "queue_wait_seconds",
	Help:    "Time paced requests waited for their slot, by rule.",
	Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
}, []string{"rule"})

var (
	concurrencyLimitDesc = prometheus.NewDesc("sluice_ratelimit_concurrency_limit",
		"The adaptive in-flight limit in force, by rule (max_concurrent adaptive).", []string{"rule"}, nil)
	minRTTDesc = prometheus.NewDesc("sluice_ratelimit_min_rtt_seconds",
		"The last uncontended latency measured by the adaptive limit, by rule.", []string{"rule"}, nil)
)

// flowMetrics are one rule's flow-shaping observers, looked up once, and
// the count of its paced requests sleeping in the kernel (pace_wait.go).
type flowMetrics struct {
	queueWait prometheus.Observer
	sleepers  *atomic.Int32
}

func flowMetricsFor(rule string) flowMetrics {
	return flowMetrics{queueWait: queueWaitHist.WithLabelValues(rule), sleepers: new(atomic.Int32)}
}

func dropFlowMetrics(rule string) {
	queueWaitHist.DeletePartialMatch(prometheus.Labels{"rule": rule})
}

func describeFlow(ch chan<- *prometheus.Desc) {
	ch <- concurrencyLimitDesc
	ch <- minRTTDesc
}

// collectFlow reports the adaptive limit of limiter l, if it has one.
func collectFlow(ch chan<- prometheus.Metric, l *limiter, e Engine) {
	le, ok := e.(*localEngine)
	if !ok {
		return
	}
	g := le.adaptive.Load()
	if g == nil {
		return
	}
	st := g.state()
	ch <- prometheus.MustNewConstMetric(concurrencyLimitDesc, prometheus.GaugeValue, float64(st.Limit), l.id)
	ch <- prometheus.MustNewConstMetric(minRTTDesc, prometheus.GaugeValue, st.MinRTT, l.id)
}
