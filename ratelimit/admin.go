package ratelimit

// Operating the rate limits: the "ratelimit" section of GET /sluice/state
// and the ratelimit_exceeded event. Both read what the limiters already
// keep (the per-rule counters and the key tables) from outside the request
// path: nothing here adds work to a request.

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
)

func init() {
	rulestore.RegisterStateReporter("ratelimit", reportState)
	rulestore.OnTick(sampleExceeded)
}

// EventExceeded is emitted at most once per rule per ExceededEventInterval
// while the rule rejects requests, with the rejections since the last one.
const EventExceeded = "ratelimit_exceeded"

// ExceededEventInterval is the least time between two ratelimit_exceeded
// events of one rule.
const ExceededEventInterval = 10 * time.Second

// Top keys: the most used keys of a rule, bounded, and masked: the key's
// preset prefix ("user:", "ip:"...) is kept, the value replaced by the
// first 12 hex digits of the SHA-256 of the whole key, so an operator can
// check a suspect (`printf %s user:alice | sha256sum | cut -c1-12`)
// without the state endpoint listing user ids or addresses.
const (
	stateTopKeys = 10
	eventTopKeys = 5
)

// RuleState is one rule in GET /sluice/state.
type RuleState struct {
	// Rule is the rule's id.
	Rule string `json:"rule"`
	// Type is its limit_type: token_bucket, sliding_window or calendar.
	Type string `json:"type"`
	// Scope is local or cluster.
	Scope string `json:"scope"`
	// Requests counts decisions by result (allowed, rejected,
	// shadow_rejected, concurrency_rejected, ...) since the rule id was
	// first used by this process.
	Requests map[string]int64 `json:"requests"`
	// Keys counts the keys the rule tracks now on this instance.
	Keys int64 `json:"keys"`
	// InFlight counts the rule's requests inside the gateway now.
	InFlight int64 `json:"in_flight"`
	// TopKeys are the keys using most of their quota, most used first (at
	// most 10; none for a rule without a rate).
	TopKeys []KeyUsage `json:"top_keys"`
	// Flow: pacing queue and adaptive limit, for rules that shape flow.
	Flow *FlowState `json:"flow,omitempty"`
	// ExceededHeld counts the refusals the ratelimit_exceeded sampler has
	// seen but holds for the rule's next event (one per
	// ExceededEventInterval at most).
	ExceededHeld int64 `json:"exceeded_held"`
}

// KeyUsage is one key's use of its quota right now.
type KeyUsage struct {
	// Key is the key, masked unless the rule has raw_keys.
	Key string `json:"key"`
	// Remaining is the whole tokens or requests left.
	Remaining int64 `json:"remaining"`
	// Used is what is spent of the key's quota, in the quota's units (tokens
	// or requests), as GET /sluice/quota/{rule}/{key} counts it.
	Used float64 `json:"used"`
	// UsedShare is Used as a share of the quota, 0..1: keys rank by it.
	UsedShare float64 `json:"used_share"`
	// Limited: a request of the rule's cost would be refused now.
	Limited bool `json:"limited"`
}

func reportState() any {
	out := []RuleState{}
	for _, l := range liveLimiters() {
		s := l.state.Load()
		if s == nil {
			continue
		}
		rs := RuleState{Rule: l.id, Type: s.rule.Type.String(), Scope: s.rule.Scope, Requests: l.counters.byResult(),
			Keys: s.engine.Keys(), InFlight: s.engine.InFlight(), TopKeys: topKeys(s, l.now(), stateTopKeys), Flow: flowStateOf(s)}
		if rs.Scope == "" {
			rs.Scope = "local"
		}
		rs.ExceededHeld = l.exceeded.heldNow()
		out = append(out, rs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return map[string]any{"rules": out}
}

func liveLimiters() []*limiter {
	var out []*limiter
	limiters.Range(func(_ string, l *limiter) bool {
		out = append(out, l)
		return true
	})
	return out
}

// topKeys formats the engine's n most used keys, masked. For scope cluster
// the quota lives in Redis: none are listed.
func topKeys(s *limiterState, now int64, n int) []KeyUsage {
	top := []KeyUsage{}
	e, ok := s.engine.(interface {
		TopKeys(r *Rule, now int64, n int) []engine.KeyUse
	})
	if !ok {
		return top
	}
	for _, u := range e.TopKeys(s.rule, now, n) {
		q, _ := newQuotaUsage(s.rule, u.Key)
		top = append(top, KeyUsage{Key: s.rule.shownKey(u.Key), Remaining: int64(u.Remaining),
			Used: math.Round(u.Used*q.Limit*1000) / 1000, UsedShare: u.Used, Limited: u.Limited})
	}
	return top
}

// shownKey is a key as logs, the state endpoint and events show it: masked,
// unless the rule opts in with raw_keys.
func (r *Rule) shownKey(key string) string {
	if r.RawKeys {
		return key
	}
	return MaskKey(key)
}

// MaskKey hides a key's value: "user:alice" becomes "user:sha256:<12 hex>"
// (handlerkit.MaskKey, shared with the circuit breaker).
func MaskKey(key string) string { return handlerkit.MaskKey(key) }

// The ratelimit_exceeded sampler: once a second it reads the rejection
// counters; a rule whose count grew gets one event, then none for
// ExceededEventInterval (its rejections meanwhile go in the next event).
// Each limiter keeps its own bookkeeping, so it goes with the rule id.
type exceededSampler struct {
	mu       sync.Mutex
	reported map[string]int64 // counts as of the last event
	lastSent time.Time
	held     int64 // refusals seen since the last event, waiting for the interval
}

func (sm *exceededSampler) heldNow() int64 {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.held
}

// rejecting are the results that mean the limit was exceeded.
var rejecting = [...]string{"rejected", "concurrency_rejected", "empty_key_rejected", "redis_unavailable"}

func sampleExceeded(now time.Time) {
	limiters.Range(func(_ string, l *limiter) bool {
		l.exceeded.sample(now, l, l.counters.byResult())
		return true
	})
}

// sample emits the rule's event if its refusals grew and the interval is
// over; c are its counters by result.
func (sm *exceededSampler) sample(now time.Time, l *limiter, c map[string]int64) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.reported == nil {
		sm.reported = map[string]int64{}
	}
	delta, total := map[string]int64{}, int64(0)
	for _, res := range rejecting {
		if d := c[res] - sm.reported[res]; d > 0 {
			delta[res], total = d, total+d
		}
	}
	sm.held = total
	if total == 0 || now.Sub(sm.lastSent) < ExceededEventInterval {
		return
	}
	if !rulestore.ShouldEmit(EventExceeded) {
		// Nobody listens: account the refusals as reported, so a
		// subscriber added later is not sent an old backlog.
		for res, v := range c {
			sm.reported[res] = v
		}
		sm.held = 0
		return
	}
	data := map[string]any{"rule": l.id, "rejected": total, "by_result": delta,
		"allowed": c["allowed"] - sm.reported["allowed"]}
	if !sm.lastSent.IsZero() {
		data["since_seconds"] = now.Sub(sm.lastSent).Seconds()
	}
	if s := l.state.Load(); s != nil {
		data["top_keys"] = topKeys(s, l.now(), eventTopKeys)
	}
	for res, v := range c {
		sm.reported[res] = v
	}
	sm.lastSent, sm.held = now, 0
	rulestore.Emit(EventExceeded, data)
}
