package grayroute

import (
	"math"
	"testing"
	"time"
)

// TestSlowestOfAnInterval: the interval's slowest 1 % are picked from
// both versions together, the canary's times taken down by the tolerance
// (×1.2 or 5 ms): a canary request counts only where its whole bucket
// lies at or above g(T), and requests tied at T share what is left of the
// 1 %.
func TestSlowestOfAnInterval(t *testing.T) {
	cfg := AnalysisConfig{LatencyPercentile: 99, MaxLatencyRatio: 1.2, MinLatencyDelta: 5 * time.Millisecond}
	cases := []struct {
		name       string
		base, can  []time.Duration // one request each
		canary, bl float64
	}{
		// 200 requests: the 2 slowest. The baseline's 100 ms requests are
		// slower than the canary's 110 ms less the tolerance (91.7 ms).
		{"within the tolerance", repeat(10*time.Millisecond, 158, 100*time.Millisecond, 2),
			repeat(10*time.Millisecond, 38, 110*time.Millisecond, 2), 0, 2},
		// The canary's 200 ms requests, taken down to 166 ms, are the slowest.
		{"beyond it", repeat(10*time.Millisecond, 158, 100*time.Millisecond, 2),
			repeat(10*time.Millisecond, 38, 200*time.Millisecond, 2), 2, 0},
		// A stall: every request of both slow alike. The slowest are still
		// 2, not the whole interval: the baseline's 500 ms one, and one of
		// the 160 tied at 400 ms (159 baseline, and the canary's 500 ms
		// taken down to 417 ms), the canary's with a chance of 1 in 160.
		{"a stall", repeat(400*time.Millisecond, 159, 500*time.Millisecond, 1),
			repeat(400*time.Millisecond, 39, 500*time.Millisecond, 1), 1.0 / 160, 2 - 1.0/160},
	}
	for _, c := range cases {
		var ic IntervalCounts
		for _, d := range c.base {
			fill(&ic.Baseline, 1, d)
		}
		for _, d := range c.can {
			fill(&ic.Canary, 1, d)
		}
		l := slowest(&ic.Canary.Latency, &ic.Baseline.Latency, cfg.slowCount(ic.Canary.Requests+ic.Baseline.Requests), cfg.tolerance)
		if math.Abs(l.canary-c.canary) > 1e-9 || math.Abs(l.baseline-c.bl) > 1e-9 {
			t.Errorf("%s: %.4g canary and %.4g baseline requests at or above T %.4gs (limit %.4gs), want %.4g and %.4g",
				c.name, l.canary, l.baseline, l.threshold, l.limit, c.canary, c.bl)
		}
	}
}

// repeat is n1 times d1, then n2 times d2.
func repeat(d1 time.Duration, n1 int, d2 time.Duration, n2 int) []time.Duration {
	var out []time.Duration
	for range n1 {
		out = append(out, d1)
	}
	for range n2 {
		out = append(out, d2)
	}
	return out
}
