package ratelimit

import "github.com/sluicegw/sluice/ratelimit/report"

// FlowState is a rule's flow shaping in GET /sluice/state.
type FlowState = report.FlowState

// AdaptiveState is the adaptive limit in GET /sluice/state.
type AdaptiveState = report.AdaptiveState

// flowStateOf reads the flow shaping of a limiter's rule, nil for a rule
// that does not shape flow.
func flowStateOf(s *limiterState) *FlowState {
	fl := &s.rule.Flow
	if fl.Behavior == Reject && fl.Adaptive == nil {
		return nil
	}
	var le *localEngine
	switch e := s.engine.(type) {
	case *localEngine:
		le = e
	case *clusterEngine:
		// A paced cluster rule's waiting requests: those holding a slot
		// reserved in Redis, and those paced locally while Redis fails.
		return &FlowState{ControlBehavior: fl.Behavior.String(), Queued: e.Queued()}
	default:
		return nil
	}
	out := &FlowState{ControlBehavior: fl.Behavior.String(), Queued: le.Queued().Load()}
	if c := le.Adaptive(); c != nil {
		out.Adaptive = report.AdaptiveStateOf(c.State())
	}
	return out
}
