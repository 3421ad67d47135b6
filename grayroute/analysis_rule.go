package grayroute

import (
	"fmt"
	"math"
	"strconv"
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
	// rec caches the canary this rule's requests are counted in.
	rec atomic.Pointer[canary]
}

// MaxMinSamples bounds min_samples, like the other counts of a rule: more
// canary requests than this per weight step is a typo, not a plan.
const MaxMinSamples = 1_000_000_000

// MaxMinLatencyDelta bounds min_latency_delta: a floor above a minute
// would switch the latency check off, which is not what a floor is for.
const MaxMinLatencyDelta = time.Minute

// analysisFields are the fields parseAnalysisField handles.
var analysisFields = map[string]bool{
	"analysis": true, "analysis_interval": true, "min_samples": true, "max_latency_ratio": true,
	"min_latency_delta": true, "latency_percentile": true, "step_weight": true, "max_weight": true, "failure_threshold": true, "state": true,
}

// parseAnalysisField parses one analysis field into g; ok is false for a
// field that is not one of them.
func (g *Rule) parseAnalysisField(f rulestore.Fields, name, v string) (ok bool, err error) {
	if !analysisFields[name] {
		return false, nil
	}
	a := g.analysisDraft()
	switch name {
	case "analysis":
		if g.analysisOn, err = rulestore.ParseBool(v); err != nil {
			return true, f.Errorf(name, "%v", err)
		}
	case "analysis_interval":
		d, err := time.ParseDuration(v)
		if err != nil || d < MinAnalysisInterval || d > time.Hour {
			return true, f.Errorf(name, "want a duration from %v to 1h, such as 10s", MinAnalysisInterval)
		}
		a.Interval = d
	case "min_samples":
		n, ok := rulestore.ParseWhole(v, 1, MaxMinSamples)
		if !ok {
			return true, f.Errorf(name, "want a whole number of canary requests %s", rulestore.Range(int64(1), MaxMinSamples))
		}
		a.MinSamples = uint64(n)
	case "max_latency_ratio":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || x < 1 || x > 100 {
			return true, f.Errorf(name, "want a ratio from 1 to 100, such as 1.2")
		}
		a.MaxLatencyRatio = x
	case "min_latency_delta":
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxMinLatencyDelta {
			return true, f.Errorf(name, "want a duration from 0 to %v, such as 5ms", MaxMinLatencyDelta)
		}
		a.MinLatencyDelta = d
	case "latency_percentile":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || x < 50 || x > 99.9 {
			return true, f.Errorf(name, "want a percentile from 50 to 99.9, such as 99")
		}
		a.LatencyPercentile = x
	case "step_weight":
		bp, err := ParseWeight(v)
		if err != nil {
			return true, f.Errorf(name, "%v", err)
		}
		if bp == 0 {
			return true, f.Errorf(name, "must be above 0 (a healthy canary would never advance)")
		}
		a.StepWeight = bp
	case "max_weight":
		bp, err := ParseWeight(v)
		if err != nil {
			return true, f.Errorf(name, "%v", err)
		}
		if bp == 0 {
			return true, f.Errorf(name, "must be above 0")
		}
		a.MaxWeight = bp
	case "failure_threshold":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return true, f.Errorf(name, "want a whole number of intervals from 1 to 1000")
		}
		a.FailureThreshold = n
	case "state":
		if g.State, err = ParseCanaryState(v); err != nil {
			return true, f.Errorf(name, "%v", err)
		}
	}
	return true, nil
}

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
		for name := range analysisFields {
			if _, set := f[name]; set && name != "analysis" && name != "state" {
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
	a.AnalysisConfig = a.AnalysisConfig.withDefaults()
	if _, set := f["weight"]; !set {
		g.Weight = min(a.StepWeight, a.MaxWeight)
	}
	return nil
}
