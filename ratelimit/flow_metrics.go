package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicegw/sluice/ratelimit/flow"
)

// queueWaitHist is the flow-shaping metrics' histogram (package
// ratelimit/flow holds them).
var queueWaitHist = flow.QueueWait

// flowMetrics are one rule's flow-shaping observers, looked up once, and
// the count of its paced requests sleeping in the kernel (flow.SleepUntil).
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

func dropFlowMetrics(rule string) { flow.DropQueueWait(rule) }

func describeFlow(ch chan<- *prometheus.Desc) { flow.Describe(ch) }

// collectFlow reports the adaptive limit of limiter l, if it has one.
func collectFlow(ch chan<- prometheus.Metric, l *limiter, e Engine) {
	le, ok := e.(*localEngine)
	if !ok {
		return
	}
	if c := le.Adaptive(); c != nil {
		flow.Collect(ch, l.id, c.State())
	}
}
