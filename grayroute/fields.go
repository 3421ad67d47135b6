package grayroute

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// field is one gray rule field: its name, its Syntax and Default as
// docs/grayroute.md's reference table shows them (a test holds the two
// together), and how its value is read into the rule. The checks across
// fields stay in ParseRule and finishAnalysis.
type field = handlerkit.Field[*ruleParse]

// ruleParse is one rule being read: the rule, its fields and the field
// being read.
type ruleParse struct {
	handlerkit.FieldReader
	g *Rule
}

// fields are the rule's fields, in the docs' order.
var fields = handlerkit.NewFieldTable(
	handlerkit.Row("match_tag", "name, or `*`", "absent = every request", func(p *ruleParse, v string) error {
		if v != "*" {
			if strings.ContainsAny(v, " \t\r\n;=,&") || strings.ContainsFunc(v, unicode.IsControl) {
				return p.Errorf("not a valid header, query or cookie name")
			}
			p.g.Tag = v
		}
		return nil
	}),
	handlerkit.Row("match_value", "value pattern, below", "absent = any non-empty value", func(p *ruleParse, v string) (err error) {
		p.g.Value, err = ParseValueMatcher(v)
		return p.Named(err)
	}),
	handlerkit.Row("match_source", "`header`, `query`, `cookie`, `any`", "`any`", func(p *ruleParse, v string) (err error) {
		p.g.Source, err = ParseSource(v)
		return p.Named(err)
	}),
	versionRow("target_version", "required", func(g *Rule) *string { return &g.Target }),
	handlerkit.Row("weight", "percent, 0–100, two decimals", "`100`", func(p *ruleParse, v string) (err error) {
		p.g.Weight, err = ParseWeight(v)
		return p.Named(err)
	}).In(syntax.NumberBounds(0, 100).By(0.01)),
	versionRow("fallback_version", "the handler's `default_version`", func(g *Rule) *string { return &g.Fallback }),
	handlerkit.Row("hash_key", "key expression", "`"+DefaultHashKey+"`", func(p *ruleParse, v string) (err error) {
		p.g.HashKey, err = handlerkit.ParseKey(v)
		return p.Named(err)
	}),
	handlerkit.Row("ramp", "schedule, below", "none", func(p *ruleParse, v string) (err error) {
		p.g.Ramp, err = ParseRamp(v)
		return p.Named(err)
	}),
	handlerkit.Row("fallback_on_open", "circuit_breaker rule id", "none", func(p *ruleParse, v string) error {
		if err := rulestore.ValidID(v); err != nil {
			return p.Errorf("want a circuit breaker rule id: %v", err)
		}
		p.g.FallbackOnOpen = v
		return nil
	}),
	handlerkit.Row("analysis", "`on` / `off`", "`off`", func(p *ruleParse, v string) (err error) {
		p.g.analysisOn, err = syntax.ParseBool(v)
		return p.Named(err)
	}),
	analysisRow(handlerkit.Row("analysis_interval", "duration, "+syntax.SpanDuration(MinAnalysisInterval, time.Hour), "`"+DefaultAnalysisInterval.String()+"`", func(p *ruleParse, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinAnalysisInterval || d > time.Hour {
			return p.Errorf("want a duration from %v to 1h, such as 10s", MinAnalysisInterval)
		}
		p.g.analysisDraft().Interval = d
		return nil
	}).In(syntax.DurationBounds(MinAnalysisInterval, time.Hour))),
	analysisRow(handlerkit.Row("min_samples", "int, "+syntax.Span[int64](1, MaxMinSamples), "`"+strconv.Itoa(DefaultMinSamples)+"`", func(p *ruleParse, v string) error {
		n, ok := syntax.ParseWhole(v, 1, MaxMinSamples)
		if !ok {
			return p.Errorf("want a whole number of canary requests %s", syntax.Range(int64(1), MaxMinSamples))
		}
		p.g.analysisDraft().MinSamples = uint64(n)
		return nil
	}).In(syntax.WholeBounds(1, MaxMinSamples))),
	analysisRow(handlerkit.Row("max_latency_ratio", "number, "+syntax.Span(1, 100.0), "`"+strconv.FormatFloat(DefaultMaxLatencyRatio, 'g', -1, 64)+"`", func(p *ruleParse, v string) error {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || x < 1 || x > 100 {
			return p.Errorf("want a ratio from 1 to 100, such as 1.2")
		}
		p.g.analysisDraft().MaxLatencyRatio = x
		return nil
	}).In(syntax.NumberBounds(1, 100))),
	analysisRow(handlerkit.Row("min_latency_delta", "duration, "+syntax.SpanDuration(0, MaxMinLatencyDelta), "`"+DefaultMinLatencyDelta.String()+"`", func(p *ruleParse, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxMinLatencyDelta {
			return p.Errorf("want a duration from 0 to %v, such as 5ms", MaxMinLatencyDelta)
		}
		p.g.analysisDraft().MinLatencyDelta = d
		return nil
	}).In(syntax.DurationBounds(0, MaxMinLatencyDelta))),
	analysisRow(handlerkit.Row("latency_percentile", "number, "+syntax.Span(50, 99.9), "`"+strconv.FormatFloat(DefaultLatencyPercentile, 'g', -1, 64)+"`", func(p *ruleParse, v string) error {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || x < 50 || x > 99.9 {
			return p.Errorf("want a percentile from 50 to 99.9, such as 99")
		}
		p.g.analysisDraft().LatencyPercentile = x
		return nil
	}).In(syntax.NumberBounds(50, 99.9))),
	stepRow("step_weight", "required with `analysis`", " (a healthy canary would never advance)", func(a *RuleAnalysis) *uint32 { return &a.StepWeight }).
		Needing(analysisOn...),
	analysisRow(stepRow("max_weight", "`100`", "", func(a *RuleAnalysis) *uint32 { return &a.MaxWeight })),
	analysisRow(handlerkit.Row("failure_threshold", "int, "+syntax.Span[int64](1, 1000), "`"+strconv.Itoa(DefaultFailureThreshold)+"`", func(p *ruleParse, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return p.Errorf("want a whole number of intervals from 1 to 1000")
		}
		p.g.analysisDraft().FailureThreshold = n
		return nil
	}).In(syntax.WholeBounds(1, 1000))),
	analysisRow(handlerkit.Row("max_step_duration", "duration, "+syntax.SpanDuration(0, MaxStepDurationLimit), "`"+DefaultMaxStepDuration.String()+"`", func(p *ruleParse, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxStepDurationLimit {
			return p.Errorf("want a duration from 0 to %v, such as 5m", MaxStepDurationLimit)
		}
		p.g.analysisDraft().MaxStepDuration = d
		return nil
	}).In(syntax.DurationBounds(0, MaxStepDurationLimit))),
	analysisRow(handlerkit.Row("on_no_evidence", "`advance`, `hold`", "`advance`", func(p *ruleParse, v string) error {
		switch v {
		case "advance":
			p.g.analysisDraft().HoldWithoutEvidence = false
		case "hold":
			p.g.analysisDraft().HoldWithoutEvidence = true
		default:
			return p.Errorf("want advance or hold")
		}
		return nil
	})),
	handlerkit.Row("state", "`running`, `paused`, `rolled_back`, `promoted`", "`running`", func(p *ruleParse, v string) (err error) {
		p.g.State, err = ParseCanaryState(v)
		return p.Named(err)
	}),
)

// analysisOn are the fields that turn analysis on, which the analysis
// settings apply with (analysisSettings); with step_weight, they are a
// rule the analysis runs on.
var analysisOn = []string{"analysis", "on", "fallback_version", "v1"}

// analysisRow is a setting of the canary analysis.
func analysisRow(row field) field { return row.Needing(analysisOn...).Needing("step_weight", "0.01") }

// versionRow is a version name (ValidVersion).
func versionRow(name, def string, at func(*Rule) *string) field {
	return handlerkit.Row(name, "version", def, func(p *ruleParse, v string) error {
		if err := ValidVersion(v); err != nil {
			return p.Named(err)
		}
		*at(p.g) = v
		return nil
	})
}

// stepRow is an analysis weight: a percentage above 0; why0 says why 0 is
// refused.
func stepRow(name, def, why0 string, at func(*RuleAnalysis) *uint32) field {
	return handlerkit.Row(name, "percent, > 0 to 100, two decimals", def, func(p *ruleParse, v string) error {
		bp, err := ParseWeight(v)
		if err != nil {
			return p.Named(err)
		}
		if bp == 0 {
			return p.Errorf("must be above 0%s", why0)
		}
		*at(p.g.analysisDraft()) = bp
		return nil
	}).In(syntax.NumberBounds(0, 100).By(0.01).Open())
}
