package grayroute

import (
	"math"
	"time"
)

// Latency histogram: fixed, log-spaced buckets shared by every instance, so
// counts from the whole fleet add up bucket by bucket. Bucket 0 holds
// latencies under latencyBase; bucket j >= 1 holds [base·f^(j-1), base·f^j)
// with f = 2^(1/latencyPerOctave); the last bucket is open-ended. Eight
// buckets per doubling keep the rounding of the latency test under 9 %.
const (
	latencyBase      = 100 * time.Microsecond
	latencyPerOctave = 8
	// NumLatencyBuckets covers 100µs to ~100s.
	NumLatencyBuckets = 161
)

// Histogram counts requests by latency bucket.
type Histogram [NumLatencyBuckets]uint64

// LatencyBucket returns the bucket of a latency.
func LatencyBucket(d time.Duration) int {
	if d < latencyBase {
		return 0
	}
	j := int(math.Floor(latencyPerOctave*math.Log2(float64(d)/float64(latencyBase)))) + 1
	if j >= NumLatencyBuckets {
		return NumLatencyBuckets - 1
	}
	return j
}

// bucketEdges[j] is bucket j's lower bound in seconds (bucket 0's is 0);
// bucket j's upper bound is bucketEdges[j+1], +Inf for the last. A table
// computed once, read only: the analysis compares against it every interval.
var bucketEdges = func() (e [NumLatencyBuckets + 1]float64) {
	for j := 1; j < NumLatencyBuckets; j++ {
		e[j] = latencyBase.Seconds() * math.Exp2(float64(j-1)/latencyPerOctave)
	}
	e[NumLatencyBuckets] = math.Inf(1)
	return e
}()

// bucketLower and bucketUpper are bucket j's bounds in seconds.
func bucketLower(j int) float64 { return bucketEdges[j] }

func bucketUpper(j int) float64 { return bucketEdges[j+1] }

// total is the number of requests in h.
func (h *Histogram) total() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// add adds o into h.
func (h *Histogram) add(o *Histogram) {
	for i, c := range o {
		h[i] += c
	}
}

// quantileBucket is the bucket holding the q-quantile of the n requests
// in h (n above 0).
func (h *Histogram) quantileBucket(q float64, n uint64) int {
	need := uint64(math.Ceil(q * float64(n)))
	var cum uint64
	for j, c := range h {
		cum += c
		if cum >= need && cum > 0 {
			return j
		}
	}
	return NumLatencyBuckets - 1
}

// quantileOf is the upper bound (seconds) of the bucket holding the
// q-quantile of the n requests in h: never below the true quantile of the
// counted requests. 0 when n is 0.
func (h *Histogram) quantileOf(q float64, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return bucketUpper(h.quantileBucket(q, n))
}

// quantileFloor is the lower bound (seconds) of the bucket holding the
// q-quantile of the n requests in h: at least 1-q of them lie at or above
// it. 0 when n is 0.
func (h *Histogram) quantileFloor(q float64, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return bucketLower(h.quantileBucket(q, n))
}

// Quantile is quantileOf over all the requests in h.
func (h *Histogram) Quantile(q float64) float64 { return h.quantileOf(q, h.total()) }

// countAtLeast counts the requests in buckets lying entirely at or above
// the limit (seconds): each of them certainly took at least limit.
func (h *Histogram) countAtLeast(limit float64) uint64 {
	var n uint64
	for j := NumLatencyBuckets - 1; j >= 0 && bucketLower(j) >= limit; j-- {
		n += h[j]
	}
	return n
}

// sprt is one side of a sequential probability ratio test between two
// Bernoulli hypotheses, p0 (no harm) and p1 (harm). llr is the log of the
// likelihood ratio of all the evidence so far. Under p0 (or anything
// less likely to produce "hits" than p0) the likelihood ratio is a
// non-negative supermartingale, so by Ville's inequality it ever reaches
// 1/α with probability at most α, however many intervals are tested. That
// is what bounds false rollbacks over a whole canary, not per interval.
type sprt struct{ llr float64 }

// observe adds hits successes out of n trials tested at p0 against p1.
// Fractional counts are the average over a random pick among tied
// requests: the log ratio averaged so is, by Jensen's inequality, no more
// likely to grow than the pick's own.
func (s *sprt) observe(hits, n float64, p0, p1 float64) {
	if n <= 0 || p0 <= 0 || p0 >= 1 || p1 <= p0 || p1 >= 1 {
		return
	}
	s.llr += hits*math.Log(p1/p0) + (n-hits)*math.Log((1-p1)/(1-p0))
}

// secondsToDuration converts seconds to a Duration.
func secondsToDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// latencyLimits are one interval's latency threshold T and the canary's
// limit g(T) (seconds), with the requests at or above each: the
// interval's slowest, the canary's times taken down by the tolerance.
type latencyLimits struct {
	threshold, limit float64
	canary, baseline float64
}

// slowCount is how many of an interval's n requests are its slowest:
// the share beyond latency_percentile, at least one.
func (c *AnalysisConfig) slowCount(n uint64) uint64 {
	return max(1, uint64(float64(n)*(1-c.LatencyPercentile/100)))
}

// slowest finds the interval's k slowest requests, the canary's times
// taken down by the tolerance g: the highest bucket edge T with at least
// k requests at or above it, counting a baseline request at or above T and
// a canary request at or above g(T) (its whole bucket there, so the
// rounding never makes the canary look slower). The requests tied at T
// (between T and the edge above) fill the k in proportion, as a random
// pick among them would on average: a stall that puts a whole interval
// in one bucket counts k requests, not all of them. Which requests are
// slowest depends on the pooled times alone, not on which version served
// them.
func slowest(canary, baseline *Histogram, k uint64, g func(float64) float64) latencyLimits {
	var above [NumLatencyBuckets + 1]uint64 // canary requests in bucket i or higher
	for i := NumLatencyBuckets - 1; i >= 0; i-- {
		above[i] = above[i+1] + canary[i]
	}
	var l latencyLimits
	var base, prevCanary, prevBase uint64 // at or above T, and at or above the edge above it
	m := NumLatencyBuckets                // the lowest bucket lying entirely at or above the limit
	for j := NumLatencyBuckets - 1; j >= 0; j-- {
		base += baseline[j]
		l.threshold, l.limit = bucketLower(j), g(bucketLower(j))
		for m > 0 && bucketLower(m-1) >= l.limit {
			m--
		}
		if all := above[m] + base; all >= k {
			tied := all - prevCanary - prevBase
			f := float64(k-prevCanary-prevBase) / float64(tied)
			l.canary = float64(prevCanary) + f*float64(above[m]-prevCanary)
			l.baseline = float64(k) - l.canary
			return l
		}
		prevCanary, prevBase = above[m], base
	}
	l.canary, l.baseline = float64(prevCanary), float64(prevBase)
	return l
}
