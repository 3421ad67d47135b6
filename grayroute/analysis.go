package grayroute

import (
	"fmt"
	"math"
)

// Canary analysis: every interval, the counts of the canary (the rule's
// target version) and of the baseline (its fallback version) are compared,
// and the analysis says whether to advance the weight, hold it, promote the
// canary or roll it back. This file is the decision alone, in plain Go; the
// glue that counts requests, adds up the fleet's counts in Redis and writes
// the verdicts is analysis_glue.go.
//
// The statistics, in plain words:
//
// Errors. Within one interval, take all the errors that happened in either
// cohort. If the canary is no worse than the baseline, each error lands in
// the canary with a probability equal to the canary's share of the
// interval's requests (π0). If the canary's error rate is ErrorRatio times
// the baseline's, that probability is higher (π1). Each interval multiplies
// a running likelihood ratio by how much better "twice as bad" explains the
// errors than "as good". Comparing within an interval makes the test
// indifferent to the baseline's own error rate and to weight changes.
//
// Latency. The baseline's latency_percentile (from everything counted
// before this interval) times max_latency_ratio is a limit. A canary as
// fast as the baseline exceeds the limit with probability at most
// 1-percentile (1 % for p99); one that is slower exceeds it more often
// (LatencyHitRatio times as often is the alternative tested). Each canary
// request multiplies a second likelihood ratio.
//
// Both ratios run over the whole canary, never reset. A likelihood ratio of
// a true "no harm" hypothesis is a fair game that cannot be expected to
// grow, so the chance that it ever reaches 1/α — in the first interval or
// the thousandth — is at most α (Ville's inequality). Each test gets half
// of FalseRollbackRate: a healthy canary is wrongly rolled back, at any
// point of its life, at most FalseRollbackRate of the time. There is no
// multiple-testing penalty to pay per interval, and no sample-size
// guessing: a clearly bad canary crosses the line after a few errors.

// Defaults for the analysis fields.
const (
	DefaultMinSamples        = 100
	DefaultMaxLatencyRatio   = 1.2
	DefaultLatencyPercentile = 99.0
	DefaultFailureThreshold  = 2
	// FalseRollbackRate bounds the chance that a canary as good as its
	// baseline is ever rolled back, over its whole life.
	FalseRollbackRate = 0.01
	// ErrorRatio is the error-rate ratio the error test is tuned to detect.
	ErrorRatio = 2.0
	// LatencyHitRatio is how much more often than 1-percentile a slow
	// canary is assumed to exceed the latency limit.
	LatencyHitRatio = 3.0
	// latencyMinTail: the baseline's percentile is trusted once about this
	// many baseline requests lie beyond it.
	latencyMinTail = 10
)

// AnalysisConfig are a rule's analysis settings.
type AnalysisConfig struct {
	// MinSamples is the number of canary requests needed, in total and at
	// each weight, before any verdict other than inconclusive.
	MinSamples uint64
	// MaxLatencyRatio is how much slower than the baseline's percentile
	// the canary's may be.
	MaxLatencyRatio float64
	// LatencyPercentile (e.g. 99) is the percentile compared.
	LatencyPercentile float64
	// StepWeight and MaxWeight in basis points: each healthy interval adds
	// StepWeight up to MaxWeight; a healthy interval at MaxWeight promotes.
	StepWeight, MaxWeight uint32
	// FailureThreshold failing intervals in a row roll the canary back.
	FailureThreshold int
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
	// Latency percentiles (seconds, bucket upper bounds) and the limit.
	CanaryLatency   float64 `json:"canary_latency_seconds"`
	BaselineLatency float64 `json:"baseline_latency_seconds"`
	LatencyLimit    float64 `json:"latency_limit_seconds"`
	// Log likelihood ratios and the bound that fails each.
	ErrorEvidence   float64 `json:"error_evidence"`
	LatencyEvidence float64 `json:"latency_evidence"`
	FailBound       float64 `json:"fail_bound"`
	// FailingIntervals in a row, including this one.
	FailingIntervals int `json:"failing_intervals"`

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
	whyHealthy
)

// Reason explains the outcome in a sentence (built on demand: the
// simulation judges hundreds of thousands of intervals).
func (v *Verdict) Reason() string {
	switch v.why {
	case whyErrors:
		return fmt.Sprintf("canary error rate %.3g%% vs baseline %.3g%%: evidence %.2f >= %.2f",
			100*v.CanaryErrorRate, 100*v.BaseErrorRate, v.ErrorEvidence, v.FailBound)
	case whyLatency:
		return fmt.Sprintf("canary p%g %.4gs vs baseline %.4gs (limit %.4gs): evidence %.2f >= %.2f",
			v.percentile, v.CanaryLatency, v.BaselineLatency, v.LatencyLimit, v.LatencyEvidence, v.FailBound)
	case whySuspect:
		return fmt.Sprintf("suspicious, holding: error evidence %.2f, latency evidence %.2f (fail at %.2f)",
			v.ErrorEvidence, v.LatencyEvidence, v.FailBound)
	case whyHealthy:
		return fmt.Sprintf("no evidence of harm: error evidence %.2f, latency evidence %.2f (fail at %.2f)",
			v.ErrorEvidence, v.LatencyEvidence, v.FailBound)
	}
	return fmt.Sprintf("waiting for %d canary requests (%d in total, %d at this weight)",
		v.minSamples, v.CanaryRequests, v.StepRequests)
}

// Analysis is the running analysis of one canary. Not safe for concurrent
// use: one goroutine feeds it an interval at a time.
type Analysis struct {
	cfg                AnalysisConfig
	canary, baseline   VersionCounts
	errTest, latTest   sprt
	stepWeight         uint32
	stepRequests       uint64
	failing            int
	weightSeen         bool
	failBound, suspect float64
}

// NewAnalysis starts the analysis of a canary.
func NewAnalysis(cfg AnalysisConfig) *Analysis {
	bound := math.Log(2 / FalseRollbackRate) // each test gets half the rate
	return &Analysis{cfg: cfg.withDefaults(), failBound: bound, suspect: bound / 2}
}

// Observe adds one interval's counts, taken at weight (basis points), and
// returns the verdict.
func (a *Analysis) Observe(c *IntervalCounts, weight uint32) Verdict {
	cfg := &a.cfg
	if !a.weightSeen || weight != a.stepWeight {
		a.stepWeight, a.stepRequests, a.weightSeen = weight, 0, true
	}

	// Errors: the canary's share of this interval's errors.
	nc, nb := c.Canary.Requests, c.Baseline.Requests
	if nc > 0 && nb > 0 {
		pi0 := float64(nc) / float64(nc+nb)
		pi1 := ErrorRatio * pi0 / (ErrorRatio*pi0 + (1 - pi0))
		a.errTest.observe(min(c.Canary.Errors, nc), min(c.Canary.Errors, nc)+min(c.Baseline.Errors, nb), pi0, pi1)
	}

	// Latency: canary requests beyond the limit set by the baseline so far
	// (this interval included: the two cohorts' draws are independent, so
	// the canary's hits stay fair to test against it).
	a.canary.add(&c.Canary)
	a.baseline.add(&c.Baseline)
	q := cfg.LatencyPercentile / 100
	var limit float64
	baseQ := a.baseline.Latency.quantileOf(q, a.baseline.Requests)
	if nb := float64(a.baseline.Requests); nb*(1-q) >= latencyMinTail && nb >= float64(cfg.MinSamples) {
		limit = cfg.MaxLatencyRatio * baseQ
		p0 := 1 - q
		p1 := math.Min(LatencyHitRatio*p0, (1+p0)/2)
		a.latTest.observe(min(c.Canary.Latency.countAtLeast(limit), nc), nc, p0, p1)
	}
	a.stepRequests += nc

	v := Verdict{
		Weight:           weight,
		CanaryRequests:   a.canary.Requests,
		CanaryErrors:     a.canary.Errors,
		BaselineRequests: a.baseline.Requests,
		BaselineErrors:   a.baseline.Errors,
		CanaryErrorRate:  rate(a.canary.Errors, a.canary.Requests),
		BaseErrorRate:    rate(a.baseline.Errors, a.baseline.Requests),
		StepRequests:     a.stepRequests,
		CanaryLatency:    a.canary.Latency.quantileOf(q, a.canary.Requests),
		BaselineLatency:  baseQ,
		LatencyLimit:     limit,
		ErrorEvidence:    a.errTest.llr,
		LatencyEvidence:  a.latTest.llr,
		FailBound:        a.failBound,
	}
	enough := a.canary.Requests >= cfg.MinSamples
	switch {
	case enough && a.errTest.llr >= a.failBound:
		v.Outcome, v.why = Failing, whyErrors
	case enough && a.latTest.llr >= a.failBound:
		v.Outcome, v.why = Failing, whyLatency
	case !enough || a.stepRequests < cfg.MinSamples:
		v.why = whyWaiting
	case a.errTest.llr >= a.suspect || a.latTest.llr >= a.suspect:
		v.why = whySuspect
	default:
		v.Outcome, v.why = Healthy, whyHealthy
	}
	v.minSamples, v.percentile = cfg.MinSamples, cfg.LatencyPercentile

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
	return v
}

func rate(errs, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(errs) / float64(n)
}
