package circuitbreaker

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/rulestore"
)

// field is one circuit_breaker rule field: its name, its Syntax and
// Default as docs/circuitbreaker.md's reference table shows them (a test
// holds the two together), and how its value is read into the rule. The
// checks across fields stay in ParseRule.
type field struct {
	name, syntax, def string
	parse             func(p *ruleParse, v string) error
}

// ruleParse is one rule being read: the rule, its fields, the field being
// read, and which optional fields were given.
type ruleParse struct {
	r                 *Rule
	f                 rulestore.Fields
	name              string
	minSet, windowSet bool
}

// fields are the rule's fields, in the docs' order.
var fields = []field{
	{"failure_threshold", "int, 0–1,000,000", "`10`", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.FailureThreshold, err = intField(p.f, p.name, 0)
		return err
	}},
	{"success_threshold", "int, 1–1,000,000", "`5`", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.SuccessThreshold, err = intField(p.f, p.name, 1)
		return err
	}},
	{"open_duration", "duration, > 0 and ≤ 366 days", "`30s`", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.OpenDuration, err = durationField(p.f, p.name, false)
		return err
	}},
	{"max_open_duration", "duration ≥ `open_duration`, ≤ 366 days", "none", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.MaxOpenDuration, err = durationField(p.f, p.name, true)
		return err
	}},
	{"window", "`<duration>` (≤ 366 days) or `<count>` (1–1,000,000)", "`100` (calls), when a rate trigger is on", parseWindow},
	{"failure_rate", "percent, 0 < p ≤ 100 (NaN, Inf rejected)", "off", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.FailureRate, err = percentField(p.f, p.name)
		return err
	}},
	{"min_requests", "int, 1–1,000,000", "`10` (or the count window, if smaller)", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.MinRequests, err = intField(p.f, p.name, 1)
		p.minSet = true
		return err
	}},
	{"slow_call_duration", "duration, > 0 and ≤ 366 days", "off", func(p *ruleParse, _ string) (err error) {
		p.r.SlowCallDuration, err = durationField(p.f, p.name, false)
		return err
	}},
	{"slow_call_rate", "percent, 0 < p ≤ 100 (NaN, Inf rejected)", "off", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.SlowCallRate, err = percentField(p.f, p.name)
		return err
	}},
	{"failure_statuses", "codes and ranges", "`500-599`", func(p *ruleParse, v string) error {
		p.r.Failures = StatusSet{}
		if err := p.r.Failures.Parse(v); err != nil {
			return p.f.Errorf(p.name, "%v", err)
		}
		return nil
	}},
	{"half_open_requests", "int, 1–1,000,000", "`1`", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.HalfOpenRequests, err = intField(p.f, p.name, 1)
		return err
	}},
	{"ramp_duration", "duration, ≤ 366 days", "off", func(p *ruleParse, _ string) (err error) {
		p.r.Settings.RampDuration, err = durationField(p.f, p.name, true)
		return err
	}},
	{"key", "placeholder expression", "none (one breaker)", func(p *ruleParse, v string) error {
		if !strings.Contains(v, "{") {
			return p.f.Errorf(p.name, "want a placeholder expression such as {http.vars.gray_version}")
		}
		p.r.Key = v
		return nil
	}},
	{"raw_keys", "`true` / `false`", "`false`", func(p *ruleParse, v string) (err error) {
		if p.r.RawKeys, err = rulestore.ParseBool(v); err != nil {
			return p.f.Errorf(p.name, "%v", err)
		}
		return nil
	}},
	{"state", "`auto`, `force_open`, `force_closed`, `disabled`", "`auto`", parseState},
	{"status", "400–599", "`503`", func(p *ruleParse, v string) (err error) {
		if p.r.Status, err = rulestore.ParseStatus(v); err != nil {
			return p.f.Errorf(p.name, "%v", err)
		}
		return nil
	}},
	{"body", "string, placeholders", "empty", func(p *ruleParse, _ string) error {
		p.r.Body = p.f[p.name]
		return nil
	}},
	{"headers", "`Name: value; Name: value`", "none", func(p *ruleParse, v string) error {
		if err := rulestore.ParseHeaderList(p.r.Headers, v); err != nil {
			return p.f.Errorf(p.name, "%v", err)
		}
		return nil
	}},
	{"header", "`<name> <value>`", "none", func(p *ruleParse, v string) error {
		hname, hval, _ := strings.Cut(v, " ")
		if !rulestore.ValidHeaderName(hname) {
			return p.f.Errorf(p.name, "want <name> <value>")
		}
		p.r.Headers.Add(hname, strings.TrimSpace(hval))
		return nil
	}},
	{"handle_errors", "`true` / `false`", "`false`", func(p *ruleParse, v string) (err error) {
		if p.r.HandleErrors, err = rulestore.ParseBool(v); err != nil {
			return p.f.Errorf(p.name, "%v", err)
		}
		return nil
	}},
}

// fieldByName indexes fields.
var fieldByName = func() map[string]*field {
	m := make(map[string]*field, len(fields))
	for i := range fields {
		m[fields[i].name] = &fields[i]
	}
	return m
}()

// parseWindow reads a call count (bare) or a time window (with a unit).
func parseWindow(p *ruleParse, v string) error {
	s := &p.r.Settings
	p.windowSet = true
	if n, e := strconv.Atoi(v); e == nil {
		if n < 1 || n > 1_000_000 {
			return p.f.Errorf(p.name, "a call count must be 1 to 1000000")
		}
		s.WindowCount = n
	} else if d, e := caddy.ParseDuration(v); e == nil && d > 0 && d <= rulestore.MaxRuleDuration {
		s.WindowDuration = d
	} else {
		return p.f.Errorf(p.name, "want a duration with a unit (e.g. 60s, at most 366 days) or a call count (e.g. 100)")
	}
	return nil
}

func parseState(p *ruleParse, v string) error {
	modes := map[string]Mode{"auto": ModeAuto, "force_open": ModeForceOpen, "force_closed": ModeForceClosed, "disabled": ModeDisabled}
	m, ok := modes[v]
	if !ok {
		return p.f.Errorf(p.name, "want auto, force_open, force_closed or disabled")
	}
	p.r.Settings.Mode = m
	return nil
}
