package grayroute

import (
	"fmt"
	"math"
	"time"
)

// Canary analysis: every interval, the counts of the canary (the rule's
// target version) and of the baseline (its fallback version) are compared,
// and the analysis says whether to advance the weight, hold it, promote the
// canary or roll it back. This file is the decision alone, in plain Go; the
// glue that counts requests, adds up the fleet's counts in Redis and writes
// the verdicts is analysis_hub.go (with analysis_fleet.go, analysis_verdict.go,
// analysis_events.go, analysis_report.go and, on the request path,
// analysis_glue.go).
//
// Both checks compare the two versions inside each interval, on requests
// served side by side, so what the whole machine does (a busy period, a
// slow minute of a shared database) falls on both alike and cancels out.
//
// Errors: the binomial test of two Poisson rates. Take all the errors of
// the interval. If the canary is no worse than the baseline, each lands in
// the canary with a probability of at most its share of the interval's
// requests (π0); if its error rate is ErrorRatio times the baseline's,
// with a higher one (π1).
//
// Latency: the same test on the interval's slowest requests, a two-sample
// quantile test stratified by time (each interval a stratum, as in the
// Cochran–Mantel–Haenszel test of 2×2 tables). The canary may be slower
// by the tolerance g(t) = max(t·max_latency_ratio, t+min_latency_delta),
// so its times are taken down by it first: a canary request of g(t) ranks
// with a baseline request of t. The interval's slow requests are then its
// slowest 1-latency_percentile of all, at least one: those at or above T,
// the highest bucket edge that leaves that many above it (a baseline
// request at or above T, a canary request at or above g(T)). T is the
// interval's own, so a stall that slows both versions for a moment raises
// it for that moment only, and a busy spell can neither hide the canary's
// tail behind a threshold set by the spell nor count every request of the
// spell as slow. A canary within the tolerance ranks no higher than the
// baseline, so it holds at most its share π0 of the slow requests (given
// the interval's times, which are slow is a draw without replacement,
// less spread than the binomial the test assumes: the bound holds); one
// slow LatencyHitRatio times as often holds more (π1).
//
// Each test multiplies a running likelihood ratio by how much better
// "harm" explains the interval than "no harm". The ratios run over the
// whole canary, never reset. Under "no harm" a likelihood ratio is a fair
// game that cannot be expected to grow, so the chance it ever reaches 1/α —
// in the first interval or the thousandth — is at most α (Ville's
// inequality). Each test gets half of FalseRollbackRate.
//
// Advancing needs evidence, not its absence. A second copy of each ratio
// starts afresh at every weight; the latency check clears a weight when
// that ratio has fallen to PassRisk (the same inequality the other way: a
// canary as slow as the alternative clears a weight with probability at
// most PassRisk). Until then the weight is held. The error check clears a
// weight with min_samples canary requests and no sign of harm (errors are
// often too rare to prove anything faster).
//
// A step's time is bounded. Latency evidence comes only from intervals
// with requests of both versions, a few slow ones each; at low traffic, or
// for a canary at the edge of the tolerance, it comes slowly or leans
// neither way. After
// MaxStepIntervals at one weight, a canary with no evidence either way
// (both scores below halfway to the failing line, the score at this
// weight between log PassRisk and its mirror, -log PassRisk) advances,
// or holds if HoldWithoutEvidence, saying so.

// Defaults for the analysis fields.
const (
	DefaultMinSamples        = 100
	DefaultMaxLatencyRatio   = 1.2
	DefaultMinLatencyDelta   = 5 * time.Millisecond
	DefaultLatencyPercentile = 99.0
	DefaultFailureThreshold  = 2
	// FalseRollbackRate bounds the chance that a canary as good as its
	// baseline is ever rolled back, over its whole life.
	FalseRollbackRate = 0.01
	// PassRisk bounds the chance that a canary as slow as the latency
	// test's alternative clears one weight.
	PassRisk = 0.05
	// ErrorRatio is the error-rate ratio the error test is tuned to detect.
	ErrorRatio = 2.0
	// LatencyHitRatio is how much more often than the baseline a slow
	// canary is assumed to exceed the latency tolerance.
	LatencyHitRatio = 2.0
)

// AnalysisConfig are a rule's analysis settings.
type AnalysisConfig struct {
	// MinSamples is the number of canary requests needed, in total and at
	// each weight, before any verdict other than inconclusive.
	MinSamples uint64
	// MaxLatencyRatio and MinLatencyDelta are the latency tolerance: the
	// canary may be MaxLatencyRatio times slower than the baseline or
	// MinLatencyDelta slower, whichever is more. A MinLatencyDelta of 0
	// is no floor (the rule's parser fills in the default).
	MaxLatencyRatio float64
	MinLatencyDelta time.Duration
	// LatencyPercentile (e.g. 99) is the percentile compared.
	LatencyPercentile float64
	// StepWeight and MaxWeight in basis points: each healthy interval adds
	// StepWeight up to MaxWeight; a healthy interval at MaxWeight promotes.
	StepWeight, MaxWeight uint32
	// FailureThreshold failing intervals in a row roll the canary back.
	FailureThreshold int
	// MaxStepIntervals bounds a weight's intervals without evidence
	// either way (0: no bound); HoldWithoutEvidence holds the weight then
	// rather than advancing.
	MaxStepIntervals    int
	HoldWithoutEvidence bool
}

// withDefaults fills unset fields.
func (c AnalysisConfig) withDefaults() AnalysisConfig {
	if c.MinSamples == 0 {
		c.MinSamples = DefaultMinSamples
	}
	if c.MaxLatencyRatio == 0 {
		c.MaxLatencyRatio = DefaultMaxLatencyRatio
	}
	if c.LatencyPercentile == 0 {
		c.LatencyPercentile = DefaultLatencyPercentile
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = DefaultFailureThreshold
	}
	if c.MaxWeight == 0 {
		c.MaxWeight = Buckets
	}
	return c
}

// tolerance is g(t): the latency a canary may reach where the baseline
// reaches t (seconds).
func (c *AnalysisConfig) tolerance(t float64) float64 {
	return math.Max(t*c.MaxLatencyRatio, t+c.MinLatencyDelta.Seconds())
}

// VersionCounts are one version's outcomes.
type VersionCounts struct {
	Requests, Errors uint64
	Latency          Histogram
}

func (v *VersionCounts) add(o *VersionCounts) {
	v.Requests += o.Requests
	v.Errors += o.Errors
	v.Latency.add(&o.Latency)
}

// IntervalCounts are one interval's outcomes of both cohorts.
type IntervalCounts struct{ Canary, Baseline VersionCounts }

// Outcome is an interval's result.
type Outcome uint8

const (
	Inconclusive Outcome = iota
	Healthy
	Failing
)

func (o Outcome) String() string {
	return [...]string{"inconclusive", "healthy", "failing"}[o]
}

// Action is what the rule should do after an interval.
type Action uint8

const (
	Hold Action = iota
	Advance
	Promote
	Rollback
)

func (a Action) String() string {
	return [...]string{"hold", "advance", "promote", "rollback"}[a]
}

// Verdict is one interval's decision with the numbers behind it.
type Verdict struct {
	Outcome Outcome `json:"-"`
	Action  Action  `json:"-"`
	// Weight after the action, in basis points.
	Weight uint32 `json:"-"`

	// Totals over the whole canary.
	CanaryRequests   uint64  `json:"canary_requests"`
	CanaryErrors     uint64  `json:"canary_errors"`
	BaselineRequests uint64  `json:"baseline_requests"`
	BaselineErrors   uint64  `json:"baseline_errors"`
	CanaryErrorRate  float64 `json:"canary_error_rate"`
	BaseErrorRate    float64 `json:"baseline_error_rate"`
	// StepRequests are the canary's requests at the current weight.
	StepRequests uint64 `json:"step_requests"`
	// Latency percentiles over the whole canary (seconds, bucket upper
	// bounds), for the record; the test compares slow requests.
	CanaryLatency   float64 `json:"canary_latency_seconds"`
	BaselineLatency float64 `json:"baseline_latency_seconds"`
	// LatencyThreshold is this interval's T, the bucket edge above which
	// its slowest requests lie (a baseline request at or above T, a
	// canary request at or above LatencyLimit, the tolerance g(T)); 0
	// when the interval had no requests of one version.
	LatencyThreshold float64 `json:"latency_threshold_seconds"`
	LatencyLimit     float64 `json:"latency_limit_seconds"`
	// CanarySlow and BaselineSlow are the slow requests over the
	// intervals tested, and SlowExpected the canary's expected part of
	// them with no harm (its share of each interval's requests).
	CanarySlow   float64 `json:"canary_slow"`
	BaselineSlow float64 `json:"baseline_slow"`
	SlowExpected float64 `json:"canary_slow_expected"`
	// Log likelihood ratios over the whole canary and the bound that
	// fails each.
	ErrorEvidence   float64 `json:"error_evidence"`
	LatencyEvidence float64 `json:"latency_evidence"`
	FailBound       float64 `json:"fail_bound"`
	// StepLatencyEvidence is the latency ratio at this weight; it clears
	// the weight at PassBound or below.
	StepLatencyEvidence float64 `json:"step_latency_evidence"`
	PassBound           float64 `json:"pass_bound"`
	// FailingIntervals in a row, including this one.
	FailingIntervals int `json:"failing_intervals"`
	// StepIntervals are the intervals judged at this weight, and
	// StepQuietIntervals those of them without a request of either
	// version (no comparison, so no latency evidence either way).
	StepIntervals      int `json:"step_intervals"`
	StepQuietIntervals int `json:"step_quiet_intervals"`
	// NoEvidence: the step reached its bound without evidence either way
	// (the canary advances, or holds with on_no_evidence hold).
	NoEvidence bool `json:"no_evidence"`

	why        reason
	minSamples uint64
	percentile float64
}

type reason uint8

const (
	whyWaiting reason = iota
	whyErrors
	whyLatency
	whySuspect
	whyLatencyEvidence
	whyHealthy
	whyNoEvidence
	whyNoEvidenceHold
)

// Reason explains the outcome in a sentence (built on demand: the
// simulation judges hundreds of thousands of intervals).
func (v *Verdict) Reason() string {
	switch v.why {
	case whyErrors:
		return fmt.Sprintf("canary error rate %.3g%% vs baseline %.3g%%: evidence %.2f >= %.2f",
			100*v.CanaryErrorRate, 100*v.BaseErrorRate, v.ErrorEvidence, v.FailBound)
	case whyLatency:
		return fmt.Sprintf("canary slower: %.0f of the %.0f slowest requests (each interval's p%g, the canary's times less the tolerance) were the canary's, %.1f expected; this interval's over %.4gs vs %.4gs: evidence %.2f >= %.2f",
			v.CanarySlow, v.CanarySlow+v.BaselineSlow, v.percentile, v.SlowExpected, v.LatencyLimit, v.LatencyThreshold, v.LatencyEvidence, v.FailBound)
	case whySuspect:
		return fmt.Sprintf("suspicious, holding: error evidence %.2f, latency evidence %.2f (fail at %.2f)",
			v.ErrorEvidence, v.LatencyEvidence, v.FailBound)
	case whyLatencyEvidence:
		return fmt.Sprintf("holding: latency evidence at this weight %.2f, clears at %.2f (%d canary requests here; %d of %d intervals here had no request of one version, so no evidence)",
			v.StepLatencyEvidence, v.PassBound, v.StepRequests, v.StepQuietIntervals, v.StepIntervals)
	case whyNoEvidence, whyNoEvidenceHold:
		do := "advancing"
		if v.why == whyNoEvidenceHold {
			do = "holding (on_no_evidence hold)"
		}
		return fmt.Sprintf("no evidence either way in %d intervals at this weight (%d without a request of one version; latency evidence here %.2f, clears at %.2f; %d canary requests here): %s",
			v.StepIntervals, v.StepQuietIntervals, v.StepLatencyEvidence, v.PassBound, v.StepRequests, do)
	case whyHealthy:
		return fmt.Sprintf("healthy: error evidence %.2f, latency evidence %.2f (fail at %.2f), at this weight %.2f <= %.2f",
			v.ErrorEvidence, v.LatencyEvidence, v.FailBound, v.StepLatencyEvidence, v.PassBound)
	}
	return fmt.Sprintf("waiting for %d canary requests (%d in total, %d at this weight)",
		v.minSamples, v.CanaryRequests, v.StepRequests)
}

// Analysis is the running analysis of one canary. Not safe for concurrent
// use: one goroutine feeds it an interval at a time.
type Analysis struct {
	cfg                  AnalysisConfig
	canary, baseline     VersionCounts
	errTest, latTest     sprt
	stepLat              sprt
	canarySlow, baseSlow float64
	slowExpected         float64
	stepWeight           uint32
	stepRequests         uint64
	stepIntervals        int
	stepQuiet            int
	failing              int
	weightSeen           bool
	failBound, suspect   float64
	passBound            float64
}

// NewAnalysis starts the analysis of a canary.
func NewAnalysis(cfg AnalysisConfig) *Analysis {
	bound := math.Log(2 / FalseRollbackRate) // each test gets half the rate
	return &Analysis{cfg: cfg.withDefaults(), failBound: bound, suspect: bound / 2, passBound: math.Log(PassRisk)}
}

// shares are the no-harm share π0 of an interval's events the canary
// holds, given its share of the requests, and the alternative π1 for a
// canary ratio times as likely to have one.
func shares(nc, nb uint64, ratio float64) (pi0, pi1 float64) {
	pi0 = float64(nc) / float64(nc+nb)
	return pi0, ratio * pi0 / (ratio*pi0 + (1 - pi0))
}

// Observe adds one interval's counts, taken at weight (basis points), and
// returns the verdict: the step's bookkeeping, the two tests on this
// interval, the outcome, the action.
func (a *Analysis) Observe(c *IntervalCounts, weight uint32) Verdict {
	a.enterStep(weight)
	lim := a.testInterval(c)
	a.stepIntervals++
	a.canary.add(&c.Canary)
	a.baseline.add(&c.Baseline)
	a.stepRequests += c.Canary.Requests

	v := a.verdict(weight, lim)
	v.Outcome, v.why, v.NoEvidence = a.outcome()
	a.act(&v, weight)
	return v
}

// enterStep starts the bookkeeping of a weight when the weight changed.
func (a *Analysis) enterStep(weight uint32) {
	if a.weightSeen && weight == a.stepWeight {
		return
	}
	a.stepWeight, a.stepRequests, a.weightSeen = weight, 0, true
	a.stepIntervals, a.stepQuiet = 0, 0
	a.stepLat = sprt{}
}

// testInterval adds the interval's evidence to the scores: the canary's
// share of the interval's errors and of its slowest requests. It returns
// the interval's latency threshold and limit (0 without a comparison).
func (a *Analysis) testInterval(c *IntervalCounts) (lim latencyLimits) {
	nc, nb := c.Canary.Requests, c.Baseline.Requests
	if nc == 0 || nb == 0 {
		a.stepQuiet++
		return lim
	}
	pi0, pi1 := shares(nc, nb, ErrorRatio)
	ec, eb := min(c.Canary.Errors, nc), min(c.Baseline.Errors, nb)
	a.errTest.observe(float64(ec), float64(ec+eb), pi0, pi1)

	lim = slowest(&c.Canary.Latency, &c.Baseline.Latency, a.cfg.slowCount(nc+nb), a.cfg.tolerance)
	sc, sb := min(lim.canary, float64(nc)), min(lim.baseline, float64(nb))
	pi0, pi1 = shares(nc, nb, LatencyHitRatio)
	a.latTest.observe(sc, sc+sb, pi0, pi1)
	a.stepLat.observe(sc, sc+sb, pi0, pi1)
	a.canarySlow += sc
	a.baseSlow += sb
	a.slowExpected += pi0 * (sc + sb)
	if sc+sb == 0 {
		a.stepQuiet++
	}
	return lim
}

// verdict are the numbers behind the interval's verdict.
func (a *Analysis) verdict(weight uint32, lim latencyLimits) Verdict {
	q := a.cfg.LatencyPercentile / 100
	return Verdict{
		Weight:              weight,
		CanaryRequests:      a.canary.Requests,
		CanaryErrors:        a.canary.Errors,
		BaselineRequests:    a.baseline.Requests,
		BaselineErrors:      a.baseline.Errors,
		CanaryErrorRate:     rate(a.canary.Errors, a.canary.Requests),
		BaseErrorRate:       rate(a.baseline.Errors, a.baseline.Requests),
		StepRequests:        a.stepRequests,
		CanaryLatency:       a.canary.Latency.quantileOf(q, a.canary.Requests),
		BaselineLatency:     a.baseline.Latency.quantileOf(q, a.baseline.Requests),
		LatencyThreshold:    lim.threshold,
		LatencyLimit:        lim.limit,
		CanarySlow:          a.canarySlow,
		BaselineSlow:        a.baseSlow,
		SlowExpected:        a.slowExpected,
		ErrorEvidence:       a.errTest.llr,
		LatencyEvidence:     a.latTest.llr,
		FailBound:           a.failBound,
		StepLatencyEvidence: a.stepLat.llr,
		PassBound:           a.passBound,
		StepIntervals:       a.stepIntervals,
		StepQuietIntervals:  a.stepQuiet,
		minSamples:          a.cfg.MinSamples,
		percentile:          a.cfg.LatencyPercentile,
	}
}

// outcome judges the scores: failing, healthy or inconclusive, why, and
// whether the step ended without evidence either way.
func (a *Analysis) outcome() (Outcome, reason, bool) {
	cfg := &a.cfg
	enough := a.canary.Requests >= cfg.MinSamples
	switch {
	case enough && a.errTest.llr >= a.failBound:
		return Failing, whyErrors, false
	case enough && a.latTest.llr >= a.failBound:
		return Failing, whyLatency, false
	case !enough || a.stepRequests < cfg.MinSamples:
		return Inconclusive, whyWaiting, false
	case a.errTest.llr >= a.suspect || a.latTest.llr >= a.suspect:
		return Inconclusive, whySuspect, false
	case a.stepLat.llr > a.passBound && cfg.MaxStepIntervals > 0 && a.stepIntervals >= cfg.MaxStepIntervals && a.stepLat.llr < -a.passBound:
		// The bound of a step, with no evidence either way: the score at
		// this weight between its pass line and the mirror of it, and
		// (the suspicious case above) the whole canary's scores below
		// halfway to failing.
		if cfg.HoldWithoutEvidence {
			return Inconclusive, whyNoEvidenceHold, true
		}
		return Healthy, whyNoEvidence, true
	case a.stepLat.llr > a.passBound:
		return Inconclusive, whyLatencyEvidence, false
	}
	return Healthy, whyHealthy, false
}

// act counts failing intervals in a row and sets the verdict's action
// and the weight after it.
func (a *Analysis) act(v *Verdict, weight uint32) {
	cfg := &a.cfg
	if v.Outcome == Failing {
		a.failing++
	} else {
		a.failing = 0
	}
	v.FailingIntervals = a.failing
	switch {
	case v.Outcome == Failing && a.failing >= cfg.FailureThreshold:
		v.Action, v.Weight = Rollback, 0
	case v.Outcome == Healthy && weight >= cfg.MaxWeight:
		v.Action, v.Weight = Promote, Buckets
	case v.Outcome == Healthy:
		v.Action, v.Weight = Advance, min(weight+cfg.StepWeight, cfg.MaxWeight)
	}
}

func rate(errs, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(errs) / float64(n)
}
