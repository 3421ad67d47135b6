package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// ControlBehavior is what a token bucket rule does with a request beyond
// its rate: refuse it (reject), make it wait for its slot (pace), or either
// of those with a rate that starts low after idleness (warm_up,
// warm_up_pace).
type ControlBehavior uint8

const (
	Reject ControlBehavior = iota
	Pace
	WarmUp
	WarmUpPace
)

func (b ControlBehavior) String() string {
	switch b {
	case Pace:
		return "pace"
	case WarmUp:
		return "warm_up"
	case WarmUpPace:
		return "warm_up_pace"
	}
	return "reject"
}

// paces reports whether requests wait for their slot.
func (b ControlBehavior) paces() bool { return b == Pace || b == WarmUpPace }

// warms reports whether the rate warms up after idleness.
func (b ControlBehavior) warms() bool { return b == WarmUp || b == WarmUpPace }

// Flow-shaping defaults.
const (
	DefaultMaxQueueWait = 500 * time.Millisecond
	DefaultMaxQueued    = 1000
	DefaultColdFactor   = 3
)

// Flow is how a rule shapes the flow it admits (docs/ratelimit.md,
// "Protecting the upstream").
type Flow struct {
	Behavior ControlBehavior
	// MaxQueueWait (ns) is the longest a paced request waits for its slot;
	// MaxQueued bounds the requests waiting at once, per rule.
	MaxQueueWait int64
	MaxQueued    int64
	// WarmUpPeriod (ns) is how long the rate takes to rise from
	// qps/ColdFactor to qps after idleness.
	WarmUpPeriod int64
	ColdFactor   float64
	// Adaptive is set by max_concurrent adaptive.
	Adaptive *AdaptiveConfig
}

// flowFields are the rule fields of flow shaping (parsed here, listed in
// knownFields).
var flowFields = []string{"control_behavior", "max_queue_wait", "max_queued", "warm_up_period", "cold_factor",
	"min_limit", "max_limit", "initial_limit", "latency_tolerance", "sample_window", "min_rtt_interval"}

var adaptiveFields = flowFields[5:]

// isAdaptive reports whether a max_concurrent value asks for the adaptive
// limit.
func isAdaptive(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "adaptive") }

// parseFlow reads the flow-shaping fields of r. It runs after the rest of
// the rule is parsed, so it can check them against limit_type and scope.
func (r *Rule) parseFlow(f rulestore.Fields, get func(string) (string, bool)) error {
	fl := &r.Flow
	if v, ok := get("control_behavior"); ok {
		switch strings.ToLower(v) {
		case "reject":
		case "pace":
			fl.Behavior = Pace
		case "warm_up":
			fl.Behavior = WarmUp
		case "warm_up_pace":
			fl.Behavior = WarmUpPace
		default:
			return f.Errorf("control_behavior", "want reject, pace, warm_up or warm_up_pace")
		}
		if fl.Behavior != Reject {
			if r.Type != TokenBucket {
				return f.Errorf("control_behavior", "%s applies to limit_type token_bucket only", fl.Behavior)
			}
			if r.Cluster() && r.LeaseSize > 0 {
				return f.Errorf("lease_size", "does not apply to control_behavior %s with scope cluster: each request reserves its own slot in Redis", fl.Behavior)
			}
		}
		if _, ok := get("burst"); ok && fl.Behavior.paces() {
			return f.Errorf("burst", "does not apply to control_behavior %s: requests are spaced 1/qps apart, and max_queue_wait bounds how far ahead they may queue", fl.Behavior)
		}
	}
	if fl.Behavior.paces() {
		fl.MaxQueueWait, fl.MaxQueued = int64(DefaultMaxQueueWait), DefaultMaxQueued
	}
	if v, ok := get("max_queue_wait"); ok {
		if !fl.Behavior.paces() {
			return f.Errorf("max_queue_wait", "applies to control_behavior pace or warm_up_pace only")
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Minute {
			return f.Errorf("max_queue_wait", "want a duration from 0s to 1m (e.g. 500ms)")
		}
		fl.MaxQueueWait = int64(d)
	}
	if v, ok := get("max_queued"); ok {
		if !fl.Behavior.paces() {
			return f.Errorf("max_queued", "applies to control_behavior pace or warm_up_pace only")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1_000_000 {
			return f.Errorf("max_queued", "want a whole number from 1 to 1000000")
		}
		fl.MaxQueued = n
	}
	if fl.Behavior.warms() {
		fl.ColdFactor = DefaultColdFactor
		v, ok := get("warm_up_period")
		if !ok {
			return f.Errorf("warm_up_period", "required by control_behavior %s (e.g. 30s)", fl.Behavior)
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 24*time.Hour {
			return f.Errorf("warm_up_period", "want a duration > 0 and at most 24h (e.g. 30s)")
		}
		fl.WarmUpPeriod = int64(d)
	} else if _, ok := get("warm_up_period"); ok {
		return f.Errorf("warm_up_period", "applies to control_behavior warm_up or warm_up_pace only")
	}
	if v, ok := get("cold_factor"); ok {
		if !fl.Behavior.warms() {
			return f.Errorf("cold_factor", "applies to control_behavior warm_up or warm_up_pace only")
		}
		c, err := strconv.ParseFloat(v, 64)
		if err != nil || !(c > 1) || c > 1000 {
			return f.Errorf("cold_factor", "want a number > 1 and at most 1000 (the cold rate is qps/cold_factor)")
		}
		fl.ColdFactor = c
	}
	if v, ok := get("max_concurrent"); ok && isAdaptive(v) {
		if r.Cluster() {
			return f.Errorf("max_concurrent", "adaptive works per instance only (scope local): each instance measures the latency it causes and finds its own limit")
		}
		a, err := parseAdaptive(f, get)
		if err != nil {
			return err
		}
		fl.Adaptive = a
	} else {
		for _, name := range adaptiveFields {
			if _, ok := get(name); ok {
				return f.Errorf(name, "applies to max_concurrent adaptive only")
			}
		}
	}
	if fl.Behavior.warms() {
		r.Limits.warm = newWarmModel(r.Limits.QPS, fl.ColdFactor, fl.WarmUpPeriod)
		for _, l := range r.Overrides {
			l.warm = newWarmModel(l.QPS, fl.ColdFactor, fl.WarmUpPeriod)
		}
	}
	r.idle = max(r.idle, fl.idle(r))
	return nil
}

// idle is how long a key's flow state needs to be untouched before it
// equals a fresh one: the pacing schedule has run out and a warm-up bucket
// is cold again.
func (fl *Flow) idle(r *Rule) int64 {
	if fl.Behavior == Reject {
		return 0
	}
	d := fl.MaxQueueWait + ceilNanos(math.Min(float64(r.Cost)/r.Limits.QPS, maxFlowSeconds))
	for _, l := range r.Overrides {
		d = max(d, fl.MaxQueueWait+ceilNanos(math.Min(float64(r.Cost)/l.QPS, maxFlowSeconds)))
	}
	if fl.Behavior.warms() {
		d += fl.WarmUpPeriod + ceilNanos(math.Min(r.Limits.Burst/r.Limits.QPS, maxFlowSeconds))
	}
	return d
}

// Adaptive concurrency defaults.
const (
	DefaultMinLimit         = 3
	DefaultMaxLimit         = 1000
	DefaultInitialLimit     = 20
	DefaultLatencyTolerance = 0.25
	DefaultSampleWindow     = 250 * time.Millisecond
	DefaultMinRTTInterval   = 30 * time.Second
)

func parseAdaptive(f rulestore.Fields, get func(string) (string, bool)) (*AdaptiveConfig, error) {
	a := &AdaptiveConfig{MinLimit: DefaultMinLimit, MaxLimit: DefaultMaxLimit, InitialLimit: DefaultInitialLimit,
		Tolerance: DefaultLatencyTolerance, SampleWindow: int64(DefaultSampleWindow), MinRTTInterval: int64(DefaultMinRTTInterval)}
	for _, n := range []struct {
		name string
		dst  *int64
	}{{"min_limit", &a.MinLimit}, {"max_limit", &a.MaxLimit}, {"initial_limit", &a.InitialLimit}} {
		if v, ok := get(n.name); ok {
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil || x < 1 || x > 1_000_000 {
				return nil, f.Errorf(n.name, "want a whole number from 1 to 1000000")
			}
			*n.dst = x
		}
	}
	if a.MinLimit > a.MaxLimit {
		return nil, f.Errorf("min_limit", "%d exceeds max_limit %d", a.MinLimit, a.MaxLimit)
	}
	if _, ok := get("initial_limit"); !ok {
		a.InitialLimit = min(max(a.InitialLimit, a.MinLimit), a.MaxLimit)
	} else if a.InitialLimit < a.MinLimit || a.InitialLimit > a.MaxLimit {
		return nil, f.Errorf("initial_limit", "%d is outside min_limit %d .. max_limit %d", a.InitialLimit, a.MinLimit, a.MaxLimit)
	}
	if v, ok := get("latency_tolerance"); ok {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x < 0 || x > 10 || math.IsNaN(x) {
			return nil, f.Errorf("latency_tolerance", "want a number from 0 to 10 (0.25 = sampled latency may be 25%% above the minimum)")
		}
		a.Tolerance = x
	}
	for _, d := range []struct {
		name   string
		dst    *int64
		lo, hi time.Duration
	}{{"sample_window", &a.SampleWindow, 10 * time.Millisecond, time.Minute}, {"min_rtt_interval", &a.MinRTTInterval, time.Second, 24 * time.Hour}} {
		if v, ok := get(d.name); ok {
			x, err := time.ParseDuration(v)
			if err != nil || x < d.lo || x > d.hi {
				return nil, f.Errorf(d.name, "want a duration from %v to %v", d.lo, d.hi)
			}
			*d.dst = int64(x)
		}
	}
	if a.MinRTTInterval < 4*a.SampleWindow {
		return nil, f.Errorf("min_rtt_interval", "%v is less than 4 sample windows (%v): the limit would spend its time re-measuring", time.Duration(a.MinRTTInterval), time.Duration(4*a.SampleWindow))
	}
	return a, nil
}

// String describes the flow settings for logs and /sluice/state.
func (fl *Flow) String() string {
	s := fl.Behavior.String()
	if fl.Behavior.paces() {
		s += fmt.Sprintf(" max_queue_wait=%v max_queued=%d", time.Duration(fl.MaxQueueWait), fl.MaxQueued)
	}
	if fl.Behavior.warms() {
		s += fmt.Sprintf(" warm_up_period=%v cold_factor=%g", time.Duration(fl.WarmUpPeriod), fl.ColdFactor)
	}
	return s
}
