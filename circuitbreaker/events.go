package circuitbreaker

import (
	"time"

	"go.uber.org/zap"

	"github.com/sluicegw/sluice/rulestore"
)

// Event names emitted on transitions.
const (
	EventOpen     = "circuit_open"
	EventHalfOpen = "circuit_half_open"
	EventClosed   = "circuit_closed"
)

// onTransition returns the transition callback of the breaker for key.
// The metric series keeps the key as shown when the breaker was made.
func (st *ruleState) onTransition(key string, exported bool) func(Transition) {
	series := st.shownKey(key)
	return func(tr Transition) {
		st.metrics.transition(series, exported, tr.To)
		key := st.shownKey(key)
		st.recent.add(TransitionRecord{At: time.Now().UTC(), Key: key, From: tr.From.String(), To: tr.To.String(), Reason: tr.Reason})
		a := rulestore.Active()
		if a == nil {
			return
		}
		fields := []zap.Field{
			zap.String("rule", st.id), zap.String("from", tr.From.String()),
			zap.String("to", tr.To.String()), zap.String("reason", tr.Reason),
		}
		if key != "" {
			fields = append(fields, zap.String("key", key))
		}
		if tr.To == StateOpen {
			fields = append(fields, zap.Duration("open_for", tr.OpenFor), zap.Int("trips", tr.Trips))
		}
		a.Logger().Warn("circuit breaker state change", fields...)

		name := EventClosed
		switch tr.To {
		case StateOpen, StateForcedOpen:
			name = EventOpen
		case StateHalfOpen:
			name = EventHalfOpen
		}
		if !rulestore.ShouldEmit(name) {
			return
		}
		rulestore.Emit(name, map[string]any{
			"rule": st.id, "key": key, "from": tr.From.String(), "to": tr.To.String(),
			"reason": tr.Reason, "open_for_seconds": tr.OpenFor.Seconds(),
		})
	}
}

// logTooManyKeys warns once per rule state that its key limit is reached.
func (st *ruleState) logTooManyKeys() {
	if st.warnedTooMany.Swap(true) {
		return
	}
	if a := rulestore.Active(); a != nil {
		a.Logger().Warn("circuit breaker rule reached its key limit; further keys share the rule's default breaker",
			zap.String("rule", st.id), zap.Int("max_keys", MaxKeys))
	}
}
