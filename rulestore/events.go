package rulestore

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Event names emitted by the rule store.
const (
	// EventRuleUpdated: a rule was created, changed or deleted (from Redis,
	// or in memory through the admin API). Data: kind, id, op (upsert or
	// delete), source (redis or memory), version (upserts).
	EventRuleUpdated = "rule_updated"
	// EventRuleRejected: a rule failed validation (from Redis, or a write
	// to the admin API). Data: kind, id, source (redis or admin_api),
	// field, error.
	EventRuleRejected = "rule_rejected"
)

// running is the newest started rulestore app: its context and events app
// are where events go. The Redis source and handler state outlive configs,
// so emitters read it at the time of the event.
var running atomic.Pointer[App]

type pendingEvent struct {
	app  *App
	name string
	data map[string]any
}

var (
	eventQueue chan pendingEvent
	eventsOnce sync.Once
)

// ShouldEmit reports whether an event of this name would reach a
// subscriber, so an emitter can skip assembling costly data.
func ShouldEmit(name string) bool {
	a := running.Load()
	return a != nil && a.events != nil && a.events.ShouldEmit(name)
}

// Emit sends a Caddy event through the events app of the running config,
// without blocking: event handlers run synchronously and may be slow (exec,
// HTTP calls), so they never run on a request or on the Redis sync. One
// dispatcher keeps events in order; 1024 events behind, further ones are
// dropped and logged. Handler packages use it for their own events.
func Emit(name string, data map[string]any) {
	a := running.Load()
	if a == nil || a.events == nil || !a.events.ShouldEmit(name) {
		return
	}
	eventsOnce.Do(func() {
		eventQueue = make(chan pendingEvent, 1024)
		go func() {
			for e := range eventQueue {
				e.app.events.Emit(e.app.ctx, e.name, e.data)
			}
		}()
	})
	select {
	case eventQueue <- pendingEvent{a, name, data}:
	default:
		// Log the first drop of a burst, not every one.
		if now := time.Now().UnixNano(); now-lastDropLog.Load() > int64(10*time.Second) {
			lastDropLog.Store(now)
			a.logger.Warn("events dropped: event handlers are too slow", zap.String("event", name))
		}
	}
}

var lastDropLog atomic.Int64

// Tickers: functions run once a second while a config runs, on one
// goroutine, for work that samples state rather than sits on the request
// path (e.g. ratelimit_exceeded events, at most one per rule per period).
var tickers struct {
	sync.Mutex
	fns  []func(now time.Time)
	once sync.Once
}

// OnTick registers fn to run once a second while a rulestore app runs.
// Call it from init.
func OnTick(fn func(now time.Time)) {
	tickers.Lock()
	tickers.fns = append(tickers.fns, fn)
	tickers.Unlock()
}

// tickInterval is the period of OnTick functions.
const tickInterval = time.Second

func startTicker() {
	tickers.once.Do(func() {
		go func() {
			t := time.NewTicker(tickInterval)
			defer t.Stop()
			for now := range t.C {
				if running.Load() == nil {
					continue
				}
				tickers.Lock()
				fns := tickers.fns
				tickers.Unlock()
				for _, fn := range fns {
					fn(now)
				}
			}
		}()
	})
}
