package engine

import (
	"fmt"
	"math"
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
func (b ControlBehavior) Paces() bool { return b == Pace || b == WarmUpPace }

// warms reports whether the rate warms up after idleness.
func (b ControlBehavior) Warms() bool { return b == WarmUp || b == WarmUpPace }

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

// idle is how long a key's flow state needs to be untouched before it
// equals a fresh one: the pacing schedule has run out and a warm-up bucket
// is cold again.
func (fl *Flow) Idle(r *Spec) int64 {
	if fl.Behavior == Reject {
		return 0
	}
	d := fl.MaxQueueWait + CeilNanos(math.Min(float64(r.Cost)/r.Limits.QPS, MaxFlowSeconds))
	for _, l := range r.Overrides {
		d = max(d, fl.MaxQueueWait+CeilNanos(math.Min(float64(r.Cost)/l.QPS, MaxFlowSeconds)))
	}
	if fl.Behavior.Warms() {
		d += fl.WarmUpPeriod + CeilNanos(math.Min(r.Limits.Burst/r.Limits.QPS, MaxFlowSeconds))
	}
	return d
}

// String describes the flow settings for logs and /sluice/state.
func (fl *Flow) String() string {
	s := fl.Behavior.String()
	if fl.Behavior.Paces() {
		s += fmt.Sprintf(" max_queue_wait=%v max_queued=%d", time.Duration(fl.MaxQueueWait), fl.MaxQueued)
	}
	if fl.Behavior.Warms() {
		s += fmt.Sprintf(" warm_up_period=%v cold_factor=%g", time.Duration(fl.WarmUpPeriod), fl.ColdFactor)
	}
	return s
}
