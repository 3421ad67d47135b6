package grayroute

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// CanaryState is a rule's canary state, the `state` field. Verdicts and
// the canary commands write it into the rule, so it reaches every instance
// and survives restarts.
type CanaryState uint8

const (
	// StateRunning (field absent or "running"): analysed, ramped.
	StateRunning CanaryState = iota
	// StatePaused: routed at its weight, not analysed or ramped.
	StatePaused
	// StateRolledBack: every request goes to the fallback version.
	StateRolledBack
	// StatePromoted: the analysis is over; the weight stays as written.
	StatePromoted
)

var stateNames = [...]string{"running", "paused", "rolled_back", "promoted"}

func (s CanaryState) String() string { return stateNames[s] }

// ParseCanaryState parses a state field.
func ParseCanaryState(v string) (CanaryState, error) {
	if v == "" {
		return StateRunning, nil
	}
	for i, n := range stateNames {
		if n == v {
			return CanaryState(i), nil
		}
	}
	return 0, fmt.Errorf("want running, paused, rolled_back or promoted")
}

// DefaultAnalysisInterval is analysis_interval's default.
const DefaultAnalysisInterval = 10 * time.Second

// MinAnalysisInterval bounds analysis_interval from below: each interval
// costs a few Redis commands per rule and instance.
const MinAnalysisInterval = 100 * time.Millisecond

// RuleAnalysis are a rule's analysis settings (nil when analysis is off).
type RuleAnalysis struct {
	AnalysisConfig
	Interval time.Duration
	// MaxStepDuration bounds a weight's time without evidence either way
	// (0: no bound); AnalysisConfig.MaxStepIntervals is it in intervals.
	MaxStepDuration time.Duration
	// rec caches the canary this rule's requests are counted in.
	rec atomic.Pointer[canary]
}

// MaxMinSamples bounds min_samples, like the other counts of a rule: more
// canary requests than this per weight step is a typo, not a plan.
const MaxMinSamples = 1_000_000_000

// MaxMinLatencyDelta bounds min_latency_delta: a floor above a minute
// would switch the latency check off, which is not what a floor is for.
const MaxMinLatencyDelta = time.Minute

// DefaultMaxStepDuration is max_step_duration's default, and
// MaxStepDurationLimit its largest value.
const (
	DefaultMaxStepDuration = 5 * time.Minute
	MaxStepDurationLimit   = 24 * time.Hour
)

// analysisSettings are the fields that need analysis on, in the docs'
// order (analysis and state apply without).
var analysisSettings = []string{"analysis_interval", "min_samples", "max_latency_ratio", "min_latency_delta",
	"latency_percentile", "step_weight", "max_weight", "failure_threshold", "max_step_duration", "on_no_evidence"}

// analysisDraft is the settings being parsed.
func (g *Rule) analysisDraft() *RuleAnalysis {
	if g.Analysis == nil {
		g.Analysis = &RuleAnalysis{}
	}
	return g.Analysis
}

// finishAnalysis checks the analysis fields together, once all are parsed.
func (g *Rule) finishAnalysis(f rulestore.Fields) error {
	if !g.analysisOn {
		for _, name := range analysisSettings {
			if _, set := f[name]; set {
				return f.Errorf(name, "needs analysis on")
			}
		}
		g.Analysis = nil
		return nil
	}
	a := g.analysisDraft()
	if g.Fallback == "" {
		return f.Errorf("fallback_version", "required with analysis on: the canary is compared with this version")
	}
	if g.Fallback == g.Target {
		return f.Errorf("fallback_version", "must differ from target_version with analysis on")
	}
	if g.Ramp != nil {
		return f.Errorf("ramp", "not with analysis on: the analysis raises the weight (step_weight, max_weight)")
	}
	if a.StepWeight == 0 {
		return f.Errorf("step_weight", "required with analysis on (e.g. 10)")
	}
	if a.Interval == 0 {
		a.Interval = DefaultAnalysisInterval
	}
	if _, set := f["min_latency_delta"]; !set {
		a.MinLatencyDelta = DefaultMinLatencyDelta
	}
	if _, set := f["max_step_duration"]; !set {
		a.MaxStepDuration = max(DefaultMaxStepDuration, a.Interval) // a long interval is not an error
	}
	if a.MaxStepDuration > 0 && a.MaxStepDuration < a.Interval {
		return f.Errorf("max_step_duration", "must be 0 or at least analysis_interval (%v): a step lasts whole intervals", a.Interval)
	}
	a.MaxStepIntervals = int((a.MaxStepDuration + a.Interval - 1) / a.Interval)
	a.AnalysisConfig = a.AnalysisConfig.withDefaults()
	if _, set := f["weight"]; !set {
		g.Weight = min(a.StepWeight, a.MaxWeight)
	}
	return nil
}
