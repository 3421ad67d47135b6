// Package eventqueue sends Caddy events off the caller's goroutine and
// runs functions once a second, for the rulestore app of one config.
// Event handlers run synchronously and may be slow (exec, HTTP calls), so
// they never run on a request or on the Redis sync.
//
// It owns:
//
//   - the queue of a config's events: bounded, without blocking the
//     emitter, a burst of drops logged once (queue.go);
//   - their dispatch in order on one goroutine, until the config is
//     unloaded (queue.go);
//   - the once-a-second tick of sampling functions, run by the active
//     config only (tick.go).
package eventqueue

import (
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"go.uber.org/zap"
)

// Size is how many events a queue holds; further ones are dropped.
const Size = 1024

// Queue holds one config's events until its goroutine (Run) emits them
// through the events app.
type Queue struct {
	events      *caddyevents.App // nil: no events app configured, nothing is queued
	ch          chan pending
	logger      *zap.Logger
	lastDropLog atomic.Int64 // unix ns
}

type pending struct {
	name string
	data map[string]any
}

// New is a queue for events (nil when no events app is configured).
func New(events *caddyevents.App, logger *zap.Logger) *Queue {
	return &Queue{events: events, ch: make(chan pending, Size), logger: logger}
}

// ShouldEmit reports whether an event of this name would reach a
// subscriber, so an emitter can skip assembling costly data.
func (q *Queue) ShouldEmit(name string) bool {
	return q != nil && q.events != nil && q.events.ShouldEmit(name)
}

// Emit queues an event without blocking: Size events behind, further ones
// are dropped and the first drop of a burst is logged.
func (q *Queue) Emit(name string, data map[string]any) {
	if !q.ShouldEmit(name) {
		return
	}
	select {
	case q.ch <- pending{name, data}:
	default:
		// Log the first drop of a burst, not every one.
		if now := time.Now().UnixNano(); now-q.lastDropLog.Load() > int64(10*time.Second) {
			q.lastDropLog.Store(now)
			q.logger.Warn("events dropped: event handlers are too slow", zap.String("event", name))
		}
	}
}

// Run emits the queued events until ctx (the config's) is done. ctx is
// also the events' context. Without an events app it returns at once.
func (q *Queue) Run(ctx caddy.Context) {
	if q.events == nil {
		return
	}
	for {
		select {
		case e := <-q.ch:
			q.events.Emit(ctx, e.name, e.data)
		case <-ctx.Done():
			return
		}
	}
}
