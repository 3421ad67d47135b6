package status

import (
	"math"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Propagation is the delay histogram with its count and sum kept
// beside it, so the status page reads them without decoding a metric.
type Propagation struct {
	prometheus.Histogram
	count   atomic.Uint64
	sumBits atomic.Uint64 // float64 seconds
}

// Observe records one delay, in seconds.
func (h *Propagation) Observe(seconds float64) {
	h.Histogram.Observe(seconds)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+seconds)) {
			break
		}
	}
	h.count.Add(1)
}

// Totals are the observations and their sum in seconds so far.
func (h *Propagation) Totals() PropagationTotals {
	return PropagationTotals{Count: h.count.Load(), SumSeconds: math.Float64frombits(h.sumBits.Load())}
}
