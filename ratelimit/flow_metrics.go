package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"

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
	queuedDesc = prometheus.NewDesc("sluice_ratelimit_queued",
		"Requests waiting for a slot of the adaptive limit, by rule and priority class.", []string{"rule", "class"}, nil)
	shedDesc = prometheus.NewDesc("sluice_ratelimit_shed_total",
		"Requests the adaptive limit's queue refused, by rule, priority class and reason (queue_full, queue_timeout, pushed_out).", []string{"rule", "class", "reason"}, nil)
)

// flowMetrics are one rule's flow-shaping observers, looked up once, and
// the count of its paced requests sleeping in the kernel (pace_wait.go).
type flowMetrics struct {
	queueWait prometheus.Observer
	sleepers  *atomic.Int32
	timers    *sync.Pool // of *time.Timer, for requests waiting in the adaptive queue
}

func flowMetricsFor(rule string) flowMetrics {
	return flowMetrics{queueWait: queueWaitHist.WithLabelValues(rule), sleepers: new(atomic.Int32), timers: new(sync.Pool)}
}

// timer is a stopped timer from the pool, started for d.
func (f flowMetrics) timer(d time.Duration) *time.Timer {
	if t, ok := f.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and keeps it for the next waiter (since Go 1.23 a
// stopped timer's channel holds no stale value).
func (f flowMetrics) putTimer(t *time.Timer) {
	t.Stop()
	f.timers.Put(t)
}

func dropFlowMetrics(rule string) {
	queueWaitHist.DeletePartialMatch(prometheus.Labels{"rule": rule})
}

func describeFlow(ch chan<- *prometheus.Desc) {
	ch <- concurrencyLimitDesc
	ch <- minRTTDesc
	ch <- queuedDesc
	ch <- shedDesc
}

// collectFlow reports the adaptive limit of limiter l, if it has one.
func collectFlow(ch chan<- prometheus.Metric, l *limiter, e Engine) {
	le, ok := e.(*localEngine)
	if !ok {
		return
	}
	c := le.Adaptive()
	if c == nil {
		return
	}
	st := c.State()
	ch <- prometheus.MustNewConstMetric(concurrencyLimitDesc, prometheus.GaugeValue, float64(st.Limit), l.id)
	ch <- prometheus.MustNewConstMetric(minRTTDesc, prometheus.GaugeValue, st.MinRTT, l.id)
	for i, cs := range st.Classes {
		class := overload.Class(i).String()
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(cs.Waiting), l.id, class)
		for _, shed := range []struct {
			reason string
			n      int64
		}{{"queue_full", cs.QueueFull}, {"queue_timeout", cs.TimedOut}, {"pushed_out", cs.PushedOut}} {
			if shed.n > 0 {
				ch <- prometheus.MustNewConstMetric(shedDesc, prometheus.CounterValue, float64(shed.n), l.id, class, shed.reason)
			}
		}
	}
}
