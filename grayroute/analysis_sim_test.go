package grayroute

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The seeded simulation of the canary analysis: canaries as good as their
// baseline must almost never be rolled back (false rollbacks), and bad ones
// must be caught within their first 2,000 requests (detection). Everything
// is drawn from a fixed seed, so every run gives the same figures; the
// figures asserted here are quoted in docs/grayroute.md.

// simInterval is the simulated analysis interval in seconds (the default).
const simInterval = 10

// simLatency is a log-normal latency: median (seconds) and sigma.
type simLatency struct {
	median, sigma float64
	probs         [NumLatencyBuckets]float64
	from          int // buckets below from are lumped into from (below the 80th percentile)
}

func newSimLatency(median, sigma float64) *simLatency {
	l := &simLatency{median: median, sigma: sigma}
	cdf := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		if math.IsInf(x, 1) {
			return 1
		}
		return 0.5 * math.Erfc(-(math.Log(x/median))/(sigma*math.Sqrt2))
	}
	l.from = LatencyBucket(secondsToDuration(median*math.Exp(0.84*sigma))) - 1
	for j := range l.probs {
		l.probs[j] = cdf(bucketUpper(j)) - cdf(bucketLower(j))
	}
	// Everything below the 80th percentile goes into one bucket below it:
	// only the tail matters to a high percentile (and to a limit 1.2 times
	// the baseline's p99), and it keeps the draws few.
	for j := 0; j < l.from; j++ {
		l.probs[l.from] += l.probs[j]
		l.probs[j] = 0
	}
	return l
}

// draw fills h with n latencies (a multinomial draw over the buckets).
func (l *simLatency) draw(rng *rand.Rand, n uint64, h *Histogram) {
	rem, remP := n, 1.0
	for j := l.from; j < NumLatencyBuckets && rem > 0; j++ {
		p := l.probs[j]
		if p <= 0 {
			continue
		}
		x := rem
		if p < remP {
			x = binomial(rng, rem, p/remP)
		}
		h[j] += x
		rem -= x
		remP -= p
		if remP <= 1e-12 {
			h[j] += rem
			rem = 0
		}
	}
	h[NumLatencyBuckets-1] += rem
}

// binomial draws from Binomial(n, p): exactly by inversion when n·p is
// small, by the normal approximation when both n·p and n·(1-p) exceed 30.
func binomial(rng *rand.Rand, n uint64, p float64) uint64 {
	switch {
	case n == 0 || p <= 0:
		return 0
	case p >= 1:
		return n
	case p > 0.5:
		return n - binomial(rng, n, 1-p)
	}
	mean := float64(n) * p
	if mean >= 30 {
		x := math.Round(mean + math.Sqrt(mean*(1-p))*rng.NormFloat64())
		return uint64(math.Max(0, math.Min(float64(n), x)))
	}
	q := 1 - p
	s := p / q
	a := float64(n+1) * s
	r := math.Pow(q, float64(n))
	u := rng.Float64()
	var x uint64
	for u > r && x < n {
		u -= r
		x++
		r *= a/float64(x) - s
	}
	return x
}

// simCanary describes one simulated canary.
type simCanary struct {
	rps                    float64 // requests per second matching the rule
	weight                 float64 // canary share, 0..1
	baseErr, canaryErr     float64 // error rates
	baseLat, canaryLat     *simLatency
	maxIntervals           int    // stop after this many intervals
	stopAfterCanary        uint64 // stop this many intervals after the canary saw this many requests (0: never)
	intervalsAfterStopSeen int    // how many intervals past stopAfterCanary are still allowed
}

// run simulates one canary at a fixed weight (the ramp is not applied, and
// a promotion does not end it: the analysis keeps judging every interval
// until the horizon, which only makes false rollbacks more likely). It
// returns the interval of the rollback (1-based) or 0, and the canary's
// requests at that point.
func (s *simCanary) run(rng *rand.Rand, cfg AnalysisConfig) (rolledBackAt int, canaryReqs uint64) {
	a := NewAnalysis(cfg)
	bp := uint32(math.Round(s.weight * Buckets))
	n := uint64(s.rps * simInterval)
	var seen uint64
	extra := -1
	for i := 1; i <= s.maxIntervals; i++ {
		var c IntervalCounts
		c.Canary.Requests = binomial(rng, n, s.weight)
		c.Baseline.Requests = n - c.Canary.Requests
		c.Canary.Errors = binomial(rng, c.Canary.Requests, s.canaryErr)
		c.Baseline.Errors = binomial(rng, c.Baseline.Requests, s.baseErr)
		s.canaryLat.draw(rng, c.Canary.Requests, &c.Canary.Latency)
		s.baseLat.draw(rng, c.Baseline.Requests, &c.Baseline.Latency)
		seen += c.Canary.Requests
		v := a.Observe(&c, bp)
		if v.Action == Rollback {
			return i, seen
		}
		if s.stopAfterCanary > 0 {
			if extra < 0 && seen >= s.stopAfterCanary {
				extra = s.intervalsAfterStopSeen
			}
			if extra == 0 {
				return 0, seen
			}
			if extra > 0 {
				extra--
			}
		}
	}
	return 0, seen
}

var (
	simRates   = []float64{20, 200, 2000}
	simWeights = []float64{0.01, 0.10, 0.50}
	simConfig  = AnalysisConfig{MinSamples: 100, StepWeight: 1000, MaxWeight: Buckets, FailureThreshold: 2}
)

// TestAnalysisFalseRollbacks: 1,000 canaries whose error rate and latency
// equal the baseline's (baselines 0.5 %, 1 %, 5 %; weights 1 %, 10 %,
// 50 %; 20 to 2,000 requests per second), each judged every 10 s for 20
// minutes: at most 1 % are rolled back.
func TestAnalysisFalseRollbacks(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(18, 1))
	lat := newSimLatency(0.050, 0.5)
	baselines := []float64{0.005, 0.01, 0.05}
	const canaries = 1000
	rolled := 0
	perCase := map[string]int{}
	for i := 0; i < canaries; i++ {
		// Walk every combination in turn (27 of them, 37 canaries each).
		b := baselines[i%3]
		w := simWeights[(i/3)%3]
		r := simRates[(i/9)%3]
		s := simCanary{rps: r, weight: w, baseErr: b, canaryErr: b, baseLat: lat, canaryLat: lat, maxIntervals: 120}
		if at, _ := s.run(rng, simConfig); at > 0 {
			rolled++
			perCase[fmt.Sprintf("base %.1f%% weight %.0f%% %g req/s", 100*b, 100*w, r)]++
		}
	}
	rate := float64(rolled) / canaries
	t.Logf("false rollbacks: %d of %d canaries (%.2f%%); by case: %v", rolled, canaries, 100*rate, perCase)
	if rate > 0.01 {
		t.Fatalf("false rollback rate %.2f%% > 1%%", 100*rate)
	}
}

// TestAnalysisDetectsErrors: a canary failing 2.5 % of requests against a
// 0.5 % baseline is rolled back by the time it has seen 2,000 requests
// (counting the failure_threshold-1 confirming intervals after the interval
// in which it reached 2,000) in at least 95 % of runs, at every weight and
// rate.
func TestAnalysisDetectsErrors(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(18, 2))
	lat := newSimLatency(0.050, 0.5)
	detect(t, rng, func(w, r float64) simCanary {
		return simCanary{rps: r, weight: w, baseErr: 0.005, canaryErr: 0.025, baseLat: lat, canaryLat: lat}
	})
}

// TestAnalysisDetectsLatency: a canary twice as slow as the baseline (every
// latency doubled, so its p99 is twice the baseline's; 1 % errors in both)
// is caught likewise.
func TestAnalysisDetectsLatency(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(18, 3))
	base, slow := newSimLatency(0.050, 0.5), newSimLatency(0.100, 0.5)
	detect(t, rng, func(w, r float64) simCanary {
		return simCanary{rps: r, weight: w, baseErr: 0.01, canaryErr: 0.01, baseLat: base, canaryLat: slow}
	})
}

func detect(t *testing.T, rng *rand.Rand, mk func(w, r float64) simCanary) {
	const runsPerCase = 60
	total, caught := 0, 0
	worst, worstCase := 2.0, "" // above any rate, so the first case names itself
	for _, w := range simWeights {
		for _, r := range simRates {
			got := 0
			for i := 0; i < runsPerCase; i++ {
				s := mk(w, r)
				s.maxIntervals = 1 << 20
				s.stopAfterCanary = 2000
				s.intervalsAfterStopSeen = simConfig.FailureThreshold - 1
				if at, _ := s.run(rng, simConfig); at > 0 {
					got++
				}
			}
			total += runsPerCase
			caught += got
			if f := float64(got) / runsPerCase; f < worst {
				worst, worstCase = f, fmt.Sprintf("weight %.0f%% %g req/s", 100*w, r)
			}
		}
	}
	rate := float64(caught) / float64(total)
	t.Logf("detected: %d of %d runs (%.1f%%); weakest case %s at %.1f%%", caught, total, 100*rate, worstCase, 100*worst)
	if rate < 0.95 {
		t.Fatalf("detection %.1f%% < 95%%", 100*rate)
	}
}
