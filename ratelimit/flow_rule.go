package ratelimit

import (
	"strings"
	"time"

	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/overload"
)

// Flow-shaping defaults.
const (
	DefaultMaxQueueWait = 500 * time.Millisecond
	DefaultMaxQueued    = 1000
	DefaultColdFactor   = 3
)

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
	if fl.Behavior.Paces() || adaptive {
		fl.MaxQueueWait, fl.MaxQueued = int64(DefaultMaxQueueWait), DefaultMaxQueued
		p.queues = true
	}
	if err := p.read("max_queue_wait", "max_queued"); err != nil {
		return err
	}
	if fl.Behavior.Warms() {
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
	if fl.Behavior.Warms() {
		r.Limits.Warm = engine.NewWarmModel(r.Limits.QPS, fl.ColdFactor, fl.WarmUpPeriod)
		for _, l := range r.Overrides {
			l.Warm = engine.NewWarmModel(l.QPS, fl.ColdFactor, fl.WarmUpPeriod)
		}
	}
	r.Idle = max(r.Idle, fl.Idle(&r.Spec))
	return nil
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
