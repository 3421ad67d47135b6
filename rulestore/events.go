package rulestore

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/sluicegw/sluice/rulestore/eventqueue"
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

// Active returns the rulestore app of the running config, or nil. State
// that outlives a config (breakers, limiters) finds the app through
// Caddy's active context at the time of an event, so its logs and events
// always go to the newest config. It takes a read lock: not for a
// request's path.
func Active() *App { return active() }

// Logger is the app's logger.
func (a *App) Logger() *zap.Logger { return a.logger }

func active() *App {
	v, err := caddy.ActiveContext().AppIfConfigured("rulestore")
	if err != nil {
		return nil
	}
	a, _ := v.(*App)
	return a
}

// ShouldEmit reports whether an event of this name would reach a
// subscriber, so an emitter can skip assembling costly data.
func ShouldEmit(name string) bool {
	a := active()
	return a != nil && a.eventQueue.ShouldEmit(name)
}

// Emit sends a Caddy event through the events app of the running config,
// without blocking: event handlers run synchronously and may be slow (exec,
// HTTP calls), so they never run on a request or on the Redis sync. Each
// config's app dispatches its events in order on one goroutine; 1024
// events behind, further ones are dropped and logged. Handler packages use
// it for their own events.
func Emit(name string, data map[string]any) {
	if a := active(); a != nil {
		a.eventQueue.Emit(name, data)
	}
}

// Tickers: functions run once a second while a config runs, for work that
// samples state rather than sits on the request path (e.g.
// ratelimit_exceeded events, at most one per rule per period). The list is
// filled by handler packages' init functions and only read afterwards.
var tickers []func(now time.Time)

// OnTick registers fn to run once a second while a rulestore app runs.
// Call it from init.
func OnTick(fn func(now time.Time)) { tickers = append(tickers, fn) }

// runTickers calls the OnTick functions until the config is unloaded. While
// a reload overlaps two configs, only the active one's ticker calls them.
func (a *App) runTickers() {
	eventqueue.RunTicks(a.ctx, func() bool { return active() == a }, tickers)
}
