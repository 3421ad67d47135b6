package flow

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicegw/sluice/ratelimit/overload"
)

// Flow-shaping metrics:
//
//	sluice_ratelimit_queue_wait_seconds{rule}  histogram: how long paced
//	    requests waited for their slot (also those whose client left)
//	sluice_ratelimit_concurrency_limit{rule}  max_concurrent adaptive: the
//	    in-flight limit in force
//	sluice_ratelimit_min_rtt_seconds{rule}    max_concurrent adaptive: the
//	    last uncontended latency measured
//	sluice_ratelimit_queued{rule,class}       max_concurrent adaptive:
//	    requests waiting for a slot now, by priority class
//	sluice_ratelimit_shed_total{rule,class,reason}  max_concurrent
//	    adaptive: requests its queue refused (queue_full, queue_timeout,
//	    pushed_out), by priority class

// QueueWait is the histogram of paced requests' waits, by rule: package
// ratelimit registers it with its other metrics.
var QueueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: "sluice", Subsystem: "ratelimit", Name: "queue_wait_seconds",
	Help:    "Time paced requests waited for their slot, by rule.",
	Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
}, []string{"rule"})

var (
	concurrencyLimitDesc = prometheus.NewDesc("sluice_ratelimit_concurrency_limit",
		"The adaptive in-flight limit in force, by rule (max_concurrent adaptive).", []string{"rule"}, nil)
	minRTTDesc = prometheus.NewDesc("sluice_ratelimit_min_rtt_seconds",
		"The last uncontended latency measured by the adaptive limit, by rule.", []string{"rule"}, nil)
	queuedDesc = prometheus.NewDesc("sluice_ratelimit_queued",
		"Requests waiting for a slot of the adaptive limit, by rule and priority class.", []string{"rule", "class"}, nil)
	shedDesc = prometheus.NewDesc("sluice_ratelimit_shed_total",
		"Requests the adaptive limit's queue refused, by rule, priority class and reason (queue_full, queue_timeout, pushed_out).", []string{"rule", "class", "reason"}, nil)
)

// DropQueueWait deletes rule's queue wait series (its rule id is no
// longer used).
func DropQueueWait(rule string) {
	QueueWait.DeletePartialMatch(prometheus.Labels{"rule": rule})
}

// Describe sends the descriptions of the adaptive limit's metrics.
func Describe(ch chan<- *prometheus.Desc) {
	ch <- concurrencyLimitDesc
	ch <- minRTTDesc
	ch <- queuedDesc
	ch <- shedDesc
}

// Collect reports the state st of rule's adaptive limit.
func Collect(ch chan<- prometheus.Metric, rule string, st overload.State) {
	ch <- prometheus.MustNewConstMetric(concurrencyLimitDesc, prometheus.GaugeValue, float64(st.Limit), rule)
	ch <- prometheus.MustNewConstMetric(minRTTDesc, prometheus.GaugeValue, st.MinRTT, rule)
	for i, cs := range st.Classes {
		class := overload.Class(i).String()
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(cs.Waiting), rule, class)
		for _, shed := range []struct {
			reason string
			n      int64
		}{{"queue_full", cs.QueueFull}, {"queue_timeout", cs.TimedOut}, {"pushed_out", cs.PushedOut}} {
			if shed.n > 0 {
				ch <- prometheus.MustNewConstMetric(shedDesc, prometheus.CounterValue, float64(shed.n), rule, class, shed.reason)
			}
		}
	}
}
