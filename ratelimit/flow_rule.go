package ratelimit

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicegw/sluice/ratelimit/overload"
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

// Flow is how a rule shapes the flow it admits (docs/ratelimit-flow.md,
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
	Adaptive *overload.Config
}

// flowFields are the rule fields of flow shaping (read by parseFlow).
var flowFields = []string{"control_behavior", "max_queue_wait", "max_queued", "warm_up_period", "cold_factor",
	"min_limit", "max_limit", "initial_limit", "latency_tolerance", "sample_window", "min_rtt_interval", "priority"}

var adaptiveFields = flowFields[5:]

// isAdaptive reports whether a max_concurrent value asks for the adaptive
// limit.
func isAdaptive(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "adaptive") }

// parseFlow reads the flow-shaping fields of r. It runs after the rest of
// the rule is parsed, so it can check them against limit_type and scope.
func (r *Rule) parseFlow(p *ruleParse) error {
	fl := &r.Flow
	if err := p.read("control_behavior"); err != nil {
		return err
	}
	adaptive := false
	if v, ok := p.Get("max_concurrent"); ok && isAdaptive(v) {
		adaptive = true
	}
	if fl.Behavior.paces() || adaptive {
		fl.MaxQueueWait, fl.MaxQueued = int64(DefaultMaxQueueWait), DefaultMaxQueued
		p.queues = true
	}
	if err := p.read("max_queue_wait", "max_queued"); err != nil {
		return err
	}
	if fl.Behavior.warms() {
		fl.ColdFactor = DefaultColdFactor
		if _, ok := p.Get("warm_up_period"); !ok {
			return p.Fields.Errorf("warm_up_period", "required by control_behavior %s (e.g. 30s)", fl.Behavior)
		}
	}
	if err := p.read("warm_up_period", "cold_factor"); err != nil {
		return err
	}
	if adaptive {
		if r.Cluster() {
			return p.Fields.Errorf("max_concurrent", "adaptive works per instance only (scope local): each instance measures the latency it causes and finds its own limit")
		}
		if err := parseAdaptive(p); err != nil {
			return err
		}
		p.adaptive.MaxQueueWait, p.adaptive.MaxQueued = fl.MaxQueueWait, fl.MaxQueued
		fl.Adaptive = p.adaptive
	} else if err := p.read(adaptiveFields...); err != nil {
		return err // each applies to max_concurrent adaptive only
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
	DefaultLatencyTolerance = 0.05
	DefaultSampleWindow     = 250 * time.Millisecond
	DefaultMinRTTInterval   = 30 * time.Second
)

// parseAdaptive reads the settings of max_concurrent adaptive into
// p.adaptive, with the checks between them.
func parseAdaptive(p *ruleParse) error {
	a := &overload.Config{MinLimit: DefaultMinLimit, MaxLimit: DefaultMaxLimit, InitialLimit: DefaultInitialLimit,
		Tolerance: DefaultLatencyTolerance, SampleWindow: int64(DefaultSampleWindow), MinRTTInterval: int64(DefaultMinRTTInterval)}
	p.adaptive = a
	p.r.priority = overload.Normal
	if err := p.read("min_limit", "max_limit", "initial_limit"); err != nil {
		return err
	}
	if a.MinLimit > a.MaxLimit {
		return p.Fields.Errorf("min_limit", "%d exceeds max_limit %d", a.MinLimit, a.MaxLimit)
	}
	if _, ok := p.Get("initial_limit"); !ok {
		a.InitialLimit = min(max(a.InitialLimit, a.MinLimit), a.MaxLimit)
	} else if a.InitialLimit < a.MinLimit || a.InitialLimit > a.MaxLimit {
		return p.Fields.Errorf("initial_limit", "%d is outside min_limit %d .. max_limit %d", a.InitialLimit, a.MinLimit, a.MaxLimit)
	}
	if err := p.read("latency_tolerance", "sample_window", "min_rtt_interval", "priority"); err != nil {
		return err
	}
	if a.MinRTTInterval < 4*a.SampleWindow {
		return p.Fields.Errorf("min_rtt_interval", "%v is less than 4 sample windows (%v): the limit would spend its time re-measuring", time.Duration(a.MinRTTInterval), time.Duration(4*a.SampleWindow))
	}
	return nil
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
