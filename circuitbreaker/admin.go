package circuitbreaker

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// Operating the breakers through Caddy's admin API:
//
//	GET  /sluice/state                          section "circuitbreaker"
//	POST /sluice/breakers/{id}/force_open       runtime override, this instance only
//	POST /sluice/breakers/{id}/force_closed
//	POST /sluice/breakers/{id}/reset            drop the override, close the breakers
func init() {
	rulestore.RegisterStateReporter("circuitbreaker", reportState)
	rulestore.RegisterAction("breakers", breakerAction)
}

// maxReportedKeys bounds the keyed breakers listed per rule in the state.
const maxReportedKeys = 20

// BreakerState is one breaker as GET /sluice/state shows it.
type BreakerState struct {
	// Key is a keyed breaker's key ("" for the rule's one breaker).
	Key string `json:"key,omitempty"`
	// State is closed, open, half_open, forced_open, forced_closed or
	// disabled.
	State string `json:"state"`
	// OpenForSeconds is the time left until half-open (state open).
	OpenForSeconds float64 `json:"open_for_seconds,omitempty"`
	// ConsecutiveFailures counts the failures since the last success.
	ConsecutiveFailures int64 `json:"consecutive_failures"`
	// Window holds the counts of the current window (rate triggers only).
	Window *WindowCounts `json:"window,omitempty"`
	// HalfOpenProbes counts the probes let through in half-open so far.
	HalfOpenProbes int64 `json:"half_open_probes,omitempty"`
	// Ramping: closed again, the breaker still lets only part of the
	// traffic through while it ramps back up.
	Ramping bool `json:"ramping,omitempty"`
	// ProbeDue: the open time is over; the next call is a probe (the
	// breaker moves to half-open on it), so State reads half_open.
	ProbeDue bool `json:"probe_due,omitempty"`
}

// WindowCounts are the calls, failures and slow calls in a breaker's window.
type WindowCounts struct {
	// Calls counts the calls in the window.
	Calls int64 `json:"calls"`
	// Failures counts those that failed.
	Failures int64 `json:"failures"`
	// Slow counts those that took slow_call_duration or longer.
	Slow int64 `json:"slow"`
}

// RuleState is one rule's breakers as GET /sluice/state shows them.
type RuleState struct {
	// Rule is the rule's id.
	Rule string `json:"rule"`
	// RuleMode is the rule's state field: auto, force_open, force_closed
	// or disabled.
	RuleMode string `json:"rule_state"`
	// Override is the admin API's runtime override on this instance (""
	// when none), which wins over RuleMode.
	Override string `json:"override,omitempty"`
	// Breaker is the rule's breaker (the one not keyed).
	Breaker BreakerState `json:"breaker"`
	// Keys counts the keyed breakers.
	Keys int64 `json:"keys"`
	// KeyStates lists up to 20 keyed breakers, worst first (open,
	// half-open, forced, closed), then by key.
	KeyStates []BreakerState `json:"key_states,omitempty"`
	// Rejected counts the requests the rule's breakers refused.
	Rejected int64 `json:"rejected"`
	// Calls counts the calls by outcome: success, failure, ignored.
	Calls map[string]int64 `json:"calls"`
	// OpenKeys counts the keyed breakers open (or forced open).
	OpenKeys int64 `json:"open_keys"`
	// HalfOpenKeys counts the keyed breakers half-open (or due a probe).
	HalfOpenKeys int64 `json:"half_open_keys"`
	// Transitions are the rule's state changes of the last hour on this
	// instance (at most 200), newest first.
	Transitions []TransitionRecord `json:"transitions"`
}

// breakerState formats a breaker's snapshot.
func breakerState(key string, sn Snapshot) BreakerState {
	out := BreakerState{Key: key, State: sn.State.String(), OpenForSeconds: sn.OpenFor.Seconds(),
		ConsecutiveFailures: sn.ConsecutiveFailures, HalfOpenProbes: sn.HalfOpenProbes, Ramping: sn.Ramping}
	if sn.State == StateOpen && sn.OpenFor <= 0 {
		out.State, out.ProbeDue = StateHalfOpen.String(), true
	}
	if sn.HasWindow {
		out.Window = &WindowCounts{Calls: sn.Calls, Failures: sn.Failures, Slow: sn.Slow}
	}
	return out
}

func reportState() any {
	out := []RuleState{}
	shared.Range(func(_ string, st *ruleState) bool {
		out = append(out, st.report())
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return map[string]any{"rules": out}
}

func (st *ruleState) report() RuleState {
	rs := RuleState{Rule: st.id, RuleMode: "auto", Breaker: breakerState("", st.def.Snapshot()), Keys: st.nkeys.Load(),
		Rejected: int64(st.metrics.rejected.Load()), Calls: map[string]int64{}}
	if r := st.currentRule(); r != nil {
		rs.RuleMode = modeName(r.Settings.Mode)
	}
	if m := st.override.Load(); m != 0 {
		rs.Override = modeName(Mode(m - 1))
	}
	for o, name := range outcomeNames {
		rs.Calls[name] = int64(st.metrics.calls[o].Load())
	}
	keyed := st.allKeys()
	for _, k := range keyed {
		switch severity(k.State) {
		case 0:
			rs.OpenKeys++
		case 1:
			rs.HalfOpenKeys++
		}
	}
	worstFirst(keyed)
	if len(keyed) > maxReportedKeys {
		keyed = keyed[:maxReportedKeys]
	}
	rs.KeyStates = keyed
	rs.Transitions = st.recent.recent(time.Now())
	return rs
}

// currentRule is the rule as the newest config's store holds it now (a
// pushed change shows before any request applied it), else the rule last
// applied (inline rules).
func (st *ruleState) currentRule() *Rule {
	if a := rulestore.Active(); a != nil {
		if r := a.Lookup(rulestore.CircuitBreaker, st.id); r != nil {
			if v, ok := r.Value.(*Rule); ok {
				return v
			}
		}
	}
	return st.rule.Load()
}

// usedState is the state of rule id, or a 404 when no handler on this
// instance uses the rule.
func usedState(id string) (*ruleState, error) {
	st, ok := shared.Load(id)
	if !ok {
		return nil, &rulestore.ActionError{Status: http.StatusNotFound,
			Err: fmt.Errorf("no circuit breaker rule %q is used by a handler on this instance", id)}
	}
	return st, nil
}

// breakerAction runs POST /sluice/breakers/{id}/{action} on every breaker
// of the rule (the default one and the keyed ones) on this instance.
func breakerAction(_ context.Context, _ *rulestore.App, id, action string) (any, error) {
	st, err := usedState(id)
	if err != nil {
		return nil, err
	}
	var override int32
	switch action {
	case "force_open":
		override = int32(ModeForceOpen) + 1
	case "force_closed":
		override = int32(ModeForceClosed) + 1
	case "reset":
	default:
		return nil, &rulestore.ActionError{Status: http.StatusBadRequest,
			Err: fmt.Errorf("unknown breaker action %q (want force_open, force_closed or reset)", action)}
	}
	st.setOverride(override, action == "reset")
	return map[string]any{"rule": id, "action": action, "state": st.report()}, nil
}
