package circuitbreaker

import (
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// field is one circuit_breaker rule field: its name, its Syntax and
// Default as docs/circuitbreaker.md's reference table shows them (a test
// holds the two together), and how its value is read into the rule. The
// checks across fields stay in ParseRule.
type field = handlerkit.Field[*ruleParse]

// ruleParse is one rule being read: the rule, its fields and the field
// being read, and which optional fields were given.
type ruleParse struct {
	handlerkit.FieldReader
	r                 *Rule
	minSet, windowSet bool
}

// fields are the rule's fields, in the docs' order.
var fields = handlerkit.NewFieldTable(
	intRow("failure_threshold", "`10`", 0, func(r *Rule) *int { return &r.Settings.FailureThreshold }),
	intRow("success_threshold", "`5`", 1, func(r *Rule) *int { return &r.Settings.SuccessThreshold }),
	durationRow("open_duration", "duration, > 0 and ≤ 366 days", "`30s`", false, func(r *Rule) *time.Duration { return &r.Settings.OpenDuration }),
	durationRow("max_open_duration", "duration ≥ `open_duration`, ≤ 366 days", "none", true, func(r *Rule) *time.Duration { return &r.Settings.MaxOpenDuration }),
	handlerkit.Row("window", "`<duration>` (≤ 366 days) or `<count>` ("+syntax.Span[int64](1, maxCount)+")", "`100` (calls), when a rate trigger is on", parseWindow).
		In(syntax.WholeBounds(1, maxCount)).Needing(rateTrigger...), // the count; a duration's bounds are open_duration's
	percentRow("failure_rate", func(r *Rule) *float64 { return &r.Settings.FailureRate }),
	handlerkit.Row("min_requests", "int, "+syntax.Span[int64](1, maxCount), "`10` (or the count window, if smaller)", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.MinRequests, err = intField(p.Fields, p.Name, 1)
		p.minSet = true
		return err
	}).In(syntax.WholeBounds(1, maxCount)).Needing(rateTrigger...),
	durationRow("slow_call_duration", "duration, > 0 and ≤ 366 days", "off", false, func(r *Rule) *time.Duration { return &r.SlowCallDuration }).Needing("slow_call_rate", "50"),
	percentRow("slow_call_rate", func(r *Rule) *float64 { return &r.Settings.SlowCallRate }).Needing("slow_call_duration", "1s"),
	handlerkit.Row("failure_statuses", "codes and ranges", "`500-599`", func(p *ruleParse, v string) error {
		p.r.Failures = StatusSet{}
		if err := p.r.Failures.Parse(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	}),
	intRow("half_open_requests", "`1`", 1, func(r *Rule) *int { return &r.Settings.HalfOpenRequests }),
	durationRow("ramp_duration", "duration, ≤ 366 days", "off", true, func(r *Rule) *time.Duration { return &r.Settings.RampDuration }),
	handlerkit.Row("key", "placeholder expression", "none (one breaker)", func(p *ruleParse, v string) error {
		if !strings.Contains(v, "{") {
			return p.Errorf("want a placeholder expression such as {http.vars.gray_version}")
		}
		p.r.Key = v
		return nil
	}),
	boolRow("raw_keys", func(r *Rule) *bool { return &r.RawKeys }),
	handlerkit.Row("state", "`auto`, `force_open`, `force_closed`, `disabled`", "`auto`", parseState),
	handlerkit.Row("status", "400–599", "`503`", func(p *ruleParse, v string) (err error) {
		if p.r.Status, err = syntax.ParseStatus(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	}).In(syntax.WholeBounds(400, 599)),
	handlerkit.Row("body", "string, placeholders", "empty", func(p *ruleParse, _ string) error {
		p.r.Body = p.Fields[p.Name]
		return nil
	}),
	handlerkit.Row("headers", "`Name: value; Name: value`", "none", func(p *ruleParse, v string) error {
		if err := rulestore.ParseHeaderList(p.r.Headers, v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	}),
	handlerkit.Row("header", "`<name> <value>`", "none", func(p *ruleParse, v string) error {
		hname, hval, _ := strings.Cut(v, " ")
		if !syntax.ValidHeaderName(hname) {
			return p.Errorf("want <name> <value>")
		}
		p.r.Headers.Add(hname, strings.TrimSpace(hval))
		return nil
	}),
	boolRow("handle_errors", func(r *Rule) *bool { return &r.HandleErrors }),
)

// rateTrigger are the fields that turn a rate trigger on, which window and
// min_requests apply to.
var rateTrigger = []string{"failure_rate", "50"}

// intRow is a whole number from lowest to maxCount.
func intRow(name, def string, lowest int, at func(*Rule) *int) field {
	return handlerkit.Row(name, "int, "+syntax.Span(int64(lowest), maxCount), def, func(p *ruleParse, _ string) (err error) {
		*at(p.r), err = intField(p.Fields, p.Name, lowest)
		return err
	}).In(syntax.WholeBounds(int64(lowest), maxCount))
}

// durationRow is a duration with a unit, up to 366 days; 0 when zeroOK.
// shown is its Syntax column.
func durationRow(name, shown, def string, zeroOK bool, at func(*Rule) *time.Duration) field {
	bounds := syntax.DurationBounds(0, syntax.MaxRuleDuration)
	if !zeroOK {
		bounds = bounds.Open()
	}
	return handlerkit.Row(name, shown, def, func(p *ruleParse, _ string) (err error) {
		*at(p.r), err = durationField(p.Fields, p.Name, zeroOK)
		return err
	}).In(bounds)
}

// percentRow is a rate trigger's percentage, off by default.
func percentRow(name string, at func(*Rule) *float64) field {
	return handlerkit.Row(name, "percent, 0 < p ≤ 100 (NaN, Inf rejected)", "off", func(p *ruleParse, _ string) (err error) {
		*at(p.r), err = percentField(p.Fields, p.Name)
		return err
	}).In(syntax.NumberBounds(0, 100).Open())
}

// boolRow is true or false, false by default.
func boolRow(name string, at func(*Rule) *bool) field {
	return handlerkit.Row(name, "`true` / `false`", "`false`", func(p *ruleParse, v string) (err error) {
		if *at(p.r), err = syntax.ParseBool(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	})
}

// parseWindow reads a call count (bare) or a time window (with a unit).
func parseWindow(p *ruleParse, v string) error {
	s := &p.r.Settings
	p.windowSet = true
	if n, e := strconv.Atoi(v); e == nil {
		if n < 1 || n > maxCount {
			return p.Errorf("a call count must be 1 to %d", maxCount)
		}
		s.WindowCount = n
	} else if d, e := caddy.ParseDuration(v); e == nil && d > 0 && d <= syntax.MaxRuleDuration {
		s.WindowDuration = d
	} else {
		return p.Errorf("want a duration with a unit (e.g. 60s, at most 366 days) or a call count (e.g. 100)")
	}
	return nil
}

func parseState(p *ruleParse, v string) error {
	modes := map[string]Mode{"auto": ModeAuto, "force_open": ModeForceOpen, "force_closed": ModeForceClosed, "disabled": ModeDisabled}
	m, ok := modes[v]
	if !ok {
		return p.Errorf("want auto, force_open, force_closed or disabled")
	}
	p.r.Settings.Mode = m
	return nil
}
