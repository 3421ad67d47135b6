// Package metrickit is what Sluice's packages share to export metrics:
// Register, for Caddy's per-config registry, and Counter (StripedCounter
// where many cores add at once), a count an engine owns and its package's
// Collector exports.
package metrickit

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Register adds collectors to a config's registry (ctx.GetMetricsRegistry).
// The collectors live for the process and every config registers them, so
// counts survive reloads; registering one again (another handler, or a
// reload onto the same registry) is not an error. A nil registry (no
// Caddy) registers nothing.
func Register(reg *prometheus.Registry, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// Counter is a monotonic count: the request path adds to it with one
// atomic, a Collector exports it, and the admin API reads it directly.
type Counter struct{ n atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Load returns the count.
func (c *Counter) Load() uint64 { return c.n.Load() }

// Metric is the count as a constant metric of desc with the label values.
// Bad label values (not UTF-8) make the scrape report an error instead of
// panicking in a Collector.
func (c *Counter) Metric(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	return counterMetric(desc, c.n.Load(), labels)
}

func counterMetric(desc *prometheus.Desc, n uint64, labels []string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(desc, prometheus.CounterValue, float64(n), labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}
