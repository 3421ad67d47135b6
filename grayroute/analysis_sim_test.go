package grayroute

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The seeded simulation of the canary analysis: canaries as good as their
// baseline must almost never be rolled back (false rollbacks), and bad ones
// must be caught within their first 2,000 requests (detection). Everything
// is drawn from a fixed seed, so every run gives the same figures; the
// figures asserted here are quoted in docs/grayroute.md.

// simInterval is the simulated analysis interval in seconds (the default).
const simInterval = 10

// simLatency is a latency distribution by bucket, from its CDF (seconds).
type simLatency struct {
	probs [NumLatencyBuckets]float64
	from  int // buckets below from are lumped into from (below the 80th percentile)
}

// logNormal is the CDF of a log-normal latency: median (seconds), sigma.
func logNormal(median, sigma float64) func(float64) float64 {
	return func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		return 0.5 * math.Erfc(-(math.Log(x/median))/(sigma*math.Sqrt2))
	}
}

// mapped is the CDF of g(Y) for Y of CDF cdf and g increasing, given g's
// inverse.
func mapped(cdf func(float64) float64, inverse func(float64) float64) func(float64) float64 {
	return func(x float64) float64 { return cdf(inverse(x)) }
}

// slower is Y times ratio or Y plus delta (seconds), whichever is more: a
// version on another host, as much slower as the tolerance allows.
func slower(cdf func(float64) float64, ratio, delta float64) func(float64) float64 {
	return mapped(cdf, func(x float64) float64 { return math.Min(x/ratio, x-delta) })
}

func newSimLatency(median, sigma float64) *simLatency {
	return newSimLatencyCDF(logNormal(median, sigma))
}

func newSimLatencyCDF(cdf func(float64) float64) *simLatency {
	l := &simLatency{}
	at := func(x float64) float64 {
		if math.IsInf(x, 1) {
			return 1
		}
		return cdf(x)
	}
	for j := range l.probs {
		l.probs[j] = at(bucketUpper(j)) - at(bucketLower(j))
		if l.from == 0 && at(bucketUpper(j)) >= 0.8 {
			l.from = max(j-1, 0)
		}
	}
	// Everything below the 80th percentile goes into one bucket below it:
	// only the tail matters to a high percentile, and it keeps the draws
	// few.
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
	stopAfterCanary        uint64 // stop once the canary saw this many requests, in 2 intervals or more (0: never)
	intervalsAfterStopSeen int    // how many intervals past stopAfterCanary are still allowed
	// load, when set, draws both versions' latencies of an interval from
	// one of these pairs: a busy machine slows both alike.
	load [][2]*simLatency
	// interval is the interval in seconds (simInterval when 0); ramp
	// applies each verdict's weight, and a promotion ends the canary.
	interval float64
	ramp     bool
}

// simResult is how one simulated canary ended.
type simResult struct {
	rolledBackAt int    // interval of the rollback (1-based), 0 if none
	promotedAt   int    // interval of the promotion when ramped, 0 if none
	longestStep  int    // the most intervals spent at one weight when ramped
	canaryReqs   uint64 // the canary's requests when it ended
	advanced     int    // intervals whose verdict advanced or promoted it
	firstAdvance uint64 // canary requests at the first advance (0: none)
}

// run simulates one canary at a fixed weight (the ramp is not applied, and
// a promotion does not end it: the analysis keeps judging every interval
// until the horizon, which only makes false rollbacks more likely).
func (s *simCanary) run(rng *rand.Rand, cfg AnalysisConfig) simResult {
	res, _ := s.runMax(rng, cfg)
	return res
}

// runMax is run that also returns the highest whole-canary score (error
// or latency) any interval reached.
func (s *simCanary) runMax(rng *rand.Rand, cfg AnalysisConfig) (res simResult, top float64) {
	a := NewAnalysis(cfg)
	bp := uint32(math.Round(s.weight * Buckets))
	iv := s.interval
	if iv == 0 {
		iv = simInterval
	}
	n := uint64(s.rps * iv)
	extra, stepFrom := -1, 1
	for i := 1; i <= s.maxIntervals; i++ {
		var c IntervalCounts
		c.Canary.Requests = binomial(rng, n, float64(bp)/Buckets)
		c.Baseline.Requests = n - c.Canary.Requests
		c.Canary.Errors = binomial(rng, c.Canary.Requests, s.canaryErr)
		c.Baseline.Errors = binomial(rng, c.Baseline.Requests, s.baseErr)
		base, canary := s.baseLat, s.canaryLat
		if len(s.load) > 0 {
			pair := s.load[rng.IntN(len(s.load))]
			base, canary = pair[0], pair[1]
		}
		canary.draw(rng, c.Canary.Requests, &c.Canary.Latency)
		base.draw(rng, c.Baseline.Requests, &c.Baseline.Latency)
		res.canaryReqs += c.Canary.Requests
		v := a.Observe(&c, bp)
		top = max(top, v.ErrorEvidence, v.LatencyEvidence)
		if s.ramp {
			res.longestStep = max(res.longestStep, i-stepFrom+1)
			if v.Action != Hold {
				bp, stepFrom = v.Weight, i+1
			}
			if v.Action == Promote {
				res.promotedAt = i
				res.advanced++
				return res, top
			}
		}
		switch v.Action {
		case Rollback:
			res.rolledBackAt = i
			return res, top
		case Advance, Promote:
			if res.advanced == 0 {
				res.firstAdvance = res.canaryReqs
			}
			res.advanced++
		}
		if s.stopAfterCanary > 0 {
			if extra < 0 && res.canaryReqs >= s.stopAfterCanary && i >= 2 {
				extra = s.intervalsAfterStopSeen
			}
			if extra == 0 {
				return res, top
			}
			if extra > 0 {
				extra--
			}
		}
	}
	return res, top
}

var (
	simRates   = []float64{20, 200, 2000}
	simWeights = []float64{0.01, 0.10, 0.50}
	simConfig  = AnalysisConfig{MinSamples: 100, StepWeight: 1000, MaxWeight: Buckets, FailureThreshold: 2,
		MinLatencyDelta: DefaultMinLatencyDelta, MaxStepIntervals: int(DefaultMaxStepDuration / (simInterval * time.Second))}
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
		if res := s.run(rng, simConfig); res.rolledBackAt > 0 {
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

// simLoad are the machine's load levels: each interval, both versions'
// latencies are multiplied by one of these (a busy minute slows both).
var simLoad = []float64{0.8, 1, 1, 1.3, 2}

// TestAnalysisFalseRollbacksHostVariance: canaries on another host, their
// latency distribution shifted by 20 % or 2 ms, whichever is larger (with
// the default tolerance of 1.2 and 5 ms), on a machine whose load varies
// from interval to interval. Baselines with medians of 1 ms, 5 ms and
// 50 ms, the weights and rates of the other tests, 1 % errors in both,
// 20 minutes each: at most 1 % are rolled back. And they do advance: at
// every weight and rate more than 95 % of them clear their first weight
// within the 20 minutes (at 1 % of 20 req/s, too few requests for
// evidence, by reaching max_step_duration).
func TestAnalysisFalseRollbacksHostVariance(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(18, 4))
	medians := []float64{0.001, 0.005, 0.050}
	loads := make([][][2]*simLatency, len(medians))
	for m, median := range medians {
		for _, f := range simLoad {
			base := logNormal(f*median, 0.5)
			loads[m] = append(loads[m], [2]*simLatency{newSimLatencyCDF(base), newSimLatencyCDF(slower(base, 1.2, 0.002))})
		}
	}
	const canaries = 999
	rolled, advanced := 0, 0
	perCase, advCase := map[string]int{}, map[string]int{}
	firsts := map[string][]uint64{}
	for i := 0; i < canaries; i++ {
		m := i % 3
		w := simWeights[(i/3)%3]
		r := simRates[(i/9)%3]
		s := simCanary{rps: r, weight: w, baseErr: 0.01, canaryErr: 0.01, load: loads[m], maxIntervals: 120}
		res := s.run(rng, simConfig)
		if res.rolledBackAt > 0 {
			rolled++
			perCase[fmt.Sprintf("median %gms weight %.0f%% %g req/s", 1000*medians[m], 100*w, r)]++
		}
		k := fmt.Sprintf("weight %.0f%% %g req/s", 100*w, r)
		if res.advanced > 0 {
			advanced++
			advCase[k]++
			firsts[k] = append(firsts[k], res.firstAdvance)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(firsts)) {
		f := firsts[k]
		slices.Sort(f)
		t.Logf("%s: %d of %d advanced, median canary requests at the first advance %d", k, advCase[k], canaries/9, f[len(f)/2])
		if float64(advCase[k]) < 0.95*canaries/9 {
			t.Errorf("%s: only %d of %d healthy canaries advanced, want 95%%", k, advCase[k], canaries/9)
		}
	}
	rate, adv := float64(rolled)/canaries, float64(advanced)/canaries
	t.Logf("host variance: %d of %d canaries rolled back (%.2f%%), by case %v; %d (%.1f%%) advanced", rolled, canaries, 100*rate, perCase, advanced, 100*adv)
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
	detect(t, rng, 2000, func(w, r float64) simCanary {
		return simCanary{rps: r, weight: w, baseErr: 0.005, canaryErr: 0.025, baseLat: lat, canaryLat: lat}
	})
}

// TestAnalysisDetectsLatency: a canary 50 % slower than the baseline
// (every latency times 1.5; 1 % errors in both) is caught likewise, by the
// time it has seen 10,000 requests.
func TestAnalysisDetectsLatency(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(18, 3))
	base, slow := newSimLatency(0.050, 0.5), newSimLatency(0.075, 0.5)
	detect(t, rng, 10000, func(w, r float64) simCanary {
		return simCanary{rps: r, weight: w, baseErr: 0.01, canaryErr: 0.01, baseLat: base, canaryLat: slow}
	})
}

// detect asserts that at least 95 % of the runs of every weight and rate
// roll the canary back by the time it has seen horizon requests.
func detect(t *testing.T, rng *rand.Rand, horizon uint64, mk func(w, r float64) simCanary) {
	const runsPerCase = 60
	total, caught := 0, 0
	var weak []string
	for _, w := range simWeights {
		for _, r := range simRates {
			got := 0
			for i := 0; i < runsPerCase; i++ {
				s := mk(w, r)
				s.maxIntervals = 1 << 20
				s.stopAfterCanary = horizon
				s.intervalsAfterStopSeen = simConfig.FailureThreshold - 1
				if res := s.run(rng, simConfig); res.rolledBackAt > 0 {
					got++
				}
			}
			total += runsPerCase
			caught += got
			c := fmt.Sprintf("weight %.0f%% %g req/s: %d of %d", 100*w, r, got, runsPerCase)
			t.Log(c)
			if float64(got) < 0.95*runsPerCase {
				weak = append(weak, c)
			}
		}
	}
	t.Logf("detected: %d of %d runs (%.1f%%)", caught, total, 100*float64(caught)/float64(total))
	if len(weak) > 0 {
		t.Fatalf("detection under 95%% in %v", weak)
	}
}

// TestAnalysisNeverAdvancesASlowCanary: a canary 80 ms slower than a
// baseline with a 10 ms median, every weight and rate, judged from its
// first request: never advanced, whether or not the baseline yet has the
// requests the latency test needs; rolled back once it has.
func TestAnalysisNeverAdvancesASlowCanary(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(18, 5))
	base := logNormal(0.010, 0.5)
	baseLat, slow := newSimLatencyCDF(base), newSimLatencyCDF(mapped(base, func(x float64) float64 { return x - 0.080 }))
	for _, w := range simWeights {
		for _, r := range simRates {
			for i := 0; i < 20; i++ {
				s := simCanary{rps: r, weight: w, baseLat: baseLat, canaryLat: slow, maxIntervals: 200}
				res := s.run(rng, simConfig)
				if res.advanced > 0 || res.rolledBackAt == 0 {
					t.Fatalf("weight %.0f%% %g req/s: advanced %d times, rolled back at interval %d (canary requests %d)",
						100*w, r, res.advanced, res.rolledBackAt, res.canaryReqs)
				}
			}
		}
	}
}

// TestAnalysisIdenticalUnderNoisyLatencyReachesAVerdict: identical
// versions (10 ms median) on a machine whose stalls slow both alike, now
// and then by a lot, so the baseline's p99 over the canary swings from
// tens to hundreds of milliseconds; 200 requests per second judged every
// second, ramped 20 % → 80 % in steps of 20, then promoted. Each
// interval's slowest requests are its own, so a stall brings evidence
// like any other interval: with max_step_duration 30s and without it,
// every canary is promoted, each step well within 30 intervals, none
// rolled back (the figures of docs/grayroute.md).
func TestAnalysisIdenticalUnderNoisyLatencyReachesAVerdict(t *testing.T) {
	t.Parallel()
	const maxStep = 30 // intervals: max_step_duration 30s at 1s intervals
	base := logNormal(0.010, 0.5)
	var load [][2]*simLatency
	for _, f := range []float64{1, 1, 1, 1, 1, 1, 1.5, 2, 4, 10} {
		l := newSimLatencyCDF(mapped(base, func(x float64) float64 { return x / f }))
		load = append(load, [2]*simLatency{l, l})
	}
	const seeds = 200
	run := func(bound int) (rolled, stalled, slowest, longest int) {
		cfg := simConfig
		cfg.StepWeight, cfg.MaxWeight, cfg.MaxStepIntervals = 2000, 8000, bound
		for seed := uint64(0); seed < seeds; seed++ {
			rng := rand.New(rand.NewPCG(54, seed))
			s := simCanary{rps: 200, weight: 0.2, interval: 1, ramp: true, load: load, maxIntervals: 600}
			res := s.run(rng, cfg)
			if res.rolledBackAt > 0 {
				rolled++
			}
			if res.promotedAt == 0 || res.longestStep > maxStep {
				stalled++
			}
			slowest, longest = max(slowest, res.promotedAt), max(longest, res.longestStep)
		}
		return
	}
	rolled, stalled, slowest, longest := run(maxStep)
	t.Logf("bound %d intervals, %d seeds: %d rolled back, %d not promoted with every step within the bound; slowest promotion at interval %d, longest step %d intervals",
		maxStep, seeds, rolled, stalled, slowest, longest)
	if rolled > 0 || stalled > 0 || longest > maxStep || slowest > 4*maxStep+maxStep {
		t.Errorf("with the bound: rolled back %d, stalled %d, longest step %d, slowest promotion %d", rolled, stalled, longest, slowest)
	}
	if slowest != 47 || longest != 21 {
		t.Errorf("slowest promotion at interval %d, longest step %d; docs/grayroute.md says 47 and 21", slowest, longest)
	}
	rolled, stalled, _, longest = run(0)
	t.Logf("no bound: %d rolled back, %d with a step longer than %d intervals or not promoted, the longest %d", rolled, stalled, maxStep, longest)
	if rolled > 0 || stalled > 0 || longest != 21 {
		t.Errorf("without the bound: rolled back %d, %d steps over %d intervals or not promoted, longest %d; docs/grayroute.md says 0, 0, 21",
			rolled, stalled, maxStep, longest)
	}
}
