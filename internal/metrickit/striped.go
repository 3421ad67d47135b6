package metrickit

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stripes is how many parts a StripedCounter has.
const Stripes = 8

// StripedCounter is a Counter that many cores add to at once: each add
// goes to one of its stripes, chosen by the caller (say, by the request's
// key), each stripe on its own cache line, so adds for different keys
// rarely contend for a line as they do on one atomic. Load sums them.
type StripedCounter struct {
	_ [64]byte // off the line of whatever precedes it
	s [Stripes]struct {
		n atomic.Uint64
		_ [56]byte
	}
}

// Add adds n to the stripe i picks (any int: taken modulo Stripes).
func (c *StripedCounter) Add(i int, n uint64) { c.s[uint(i)%Stripes].n.Add(n) }

// Load returns the count: the stripes' sum.
func (c *StripedCounter) Load() uint64 {
	var sum uint64
	for i := range c.s {
		sum += c.s[i].n.Load()
	}
	return sum
}

// Metric is the count as a constant metric of desc, as Counter's.
func (c *StripedCounter) Metric(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	return counterMetric(desc, c.Load(), labels)
}
