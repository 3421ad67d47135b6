package grayroute

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The collectors live for the process and are registered on every config's
// registry, so counts survive reloads and a reload never panics on a
// duplicate registration. Labels are bounded: rule ids and versions come
// from the configuration and Redis, never from the request.
var metrics = struct {
	once     sync.Once
	requests *prometheus.CounterVec
	random   *prometheus.CounterVec
}{}

func initMetrics(reg *prometheus.Registry) error {
	metrics.once.Do(func() {
		metrics.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice",
			Subsystem: "grayroute",
			Name:      "requests_total",
			Help:      "Requests routed by grayroute, by deciding rule (empty: no rule matched) and version.",
		}, []string{"rule", "version"})
		metrics.random = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice",
			Subsystem: "grayroute",
			Name:      "random_assignments_total",
			Help:      "Requests split at random because no hash key resolved, by rule.",
		}, []string{"rule"})
	})
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{metrics.requests, metrics.random} {
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// ruleCounters caches one rule's two series so the request path does not
// hash label values.
type ruleCounters struct {
	target, fallback prometheus.Counter
	fallbackVersion  string
}

func (g *Rule) countersFor(fallback string) *ruleCounters {
	if c := g.counters.Load(); c != nil && c.fallbackVersion == fallback {
		return c
	}
	c := &ruleCounters{
		target:          metrics.requests.WithLabelValues(g.ID, g.Target),
		fallback:        metrics.requests.WithLabelValues(g.ID, fallback),
		fallbackVersion: fallback,
	}
	g.counters.Store(c)
	return c
}
