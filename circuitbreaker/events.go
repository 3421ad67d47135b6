package circuitbreaker

import (
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/rulestore"
)

// hooks are where transitions are reported: the logger and events app of
// the newest config. Breakers outlive configs, so they read it at the time
// of the transition rather than keeping their creator's.
type hooks struct {
	ctx    caddy.Context
	logger *zap.Logger
	events *caddyevents.App // nil if unavailable
	store  *rulestore.App   // for IsOpen
}

var (
	current atomic.Pointer[hooks] // the newest live hooks, or nil
	liveMu  sync.Mutex
	live    []*hooks // hooks of provisioned handlers not yet cleaned up, oldest first
)

// addHooks makes h the hooks transitions report to.
func addHooks(h *hooks) {
	liveMu.Lock()
	defer liveMu.Unlock()
	live = append(live, h)
	current.Store(h)
}

// removeHooks drops h; the newest remaining hooks take over, so a config
// that fails to load (and is cleaned up) does not silence the running one.
func removeHooks(h *hooks) {
	liveMu.Lock()
	defer liveMu.Unlock()
	for i, x := range live {
		if x == h {
			live = append(live[:i], live[i+1:]...)
			break
		}
	}
	if len(live) == 0 {
		current.Store(nil)
	} else {
		current.Store(live[len(live)-1])
	}
}

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
		h := current.Load()
		if h == nil {
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
		h.logger.Warn("circuit breaker state change", fields...)

		name := EventClosed
		switch tr.To {
		case StateOpen, StateForcedOpen:
			name = EventOpen
		case StateHalfOpen:
			name = EventHalfOpen
		}
		if h.events == nil || !h.events.ShouldEmit(name) {
			return
		}
		data := map[string]any{
			"rule": st.id, "key": key, "from": tr.From.String(), "to": tr.To.String(),
			"reason": tr.Reason, "open_for_seconds": tr.OpenFor.Seconds(),
		}
		emit(pendingEvent{h, name, data})
	}
}

type pendingEvent struct {
	hooks *hooks
	name  string
	data  map[string]any
}

var (
	eventQueue chan pendingEvent
	eventsOnce sync.Once
)

// emit hands an event to the dispatcher without blocking: event handlers
// run synchronously and may be slow (exec, http calls), so they never run
// on a request's goroutine. One dispatcher keeps the events in order; if
// it falls 1024 events behind, further events are dropped and logged.
func emit(e pendingEvent) {
	eventsOnce.Do(func() {
		eventQueue = make(chan pendingEvent, 1024)
		go func() {
			for e := range eventQueue {
				e.hooks.events.Emit(e.hooks.ctx, e.name, e.data)
			}
		}()
	})
	select {
	case eventQueue <- e:
	default:
		e.hooks.logger.Warn("circuit breaker event dropped: event handlers are too slow", zap.String("event", e.name))
	}
}

var tooManyKeys sync.Map

func logTooManyKeys(id string) {
	if _, seen := tooManyKeys.LoadOrStore(id, true); seen {
		return
	}
	if h := current.Load(); h != nil {
		h.logger.Warn("circuit breaker rule reached its key limit; further keys share the rule's default breaker",
			zap.String("rule", id), zap.Int("max_keys", MaxKeys))
	}
}
