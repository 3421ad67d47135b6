package report

import "github.com/sluicegw/sluice/ratelimit/overload"

// FlowState is a rule's flow shaping in GET /sluice/state.
type FlowState struct {
	// ControlBehavior is reject, pace, warm_up or warm_up_pace.
	ControlBehavior string `json:"control_behavior"`
	// Queued is the number of paced requests waiting for their slot now.
	Queued int64 `json:"queued"`
	// Adaptive is the max_concurrent adaptive limit: the limit in force,
	// minRTT, the last window's latency and the queue by priority class.
	Adaptive *AdaptiveState `json:"adaptive,omitempty"`
}

// AdaptiveState is the adaptive limit in GET /sluice/state.
type AdaptiveState struct {
	overload.State
	// Queue: per priority class (critical, high, normal, low, sheddable),
	// the requests waiting now, and since the rule started those admitted
	// after waiting and those refused (queue_full, queue_timeout,
	// pushed_out). Classes that never queued are left out.
	Queue map[string]overload.ClassState `json:"queue,omitempty"`
}

// AdaptiveStateOf is the state of an adaptive limit, its classes that
// queued by name.
func AdaptiveStateOf(st overload.State) *AdaptiveState {
	out := &AdaptiveState{State: st}
	for i, c := range st.Classes {
		if c != (overload.ClassState{}) {
			if out.Queue == nil {
				out.Queue = map[string]overload.ClassState{}
			}
			out.Queue[overload.Class(i).String()] = c
		}
	}
	return out
}
