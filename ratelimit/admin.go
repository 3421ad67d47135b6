package ratelimit

// Operating the rate limits: the "ratelimit" section of GET /sluice/state
// and the ratelimit_exceeded event. Both read what the limiters already
// keep (the per-rule counters and the key tables) from outside the request
// path: nothing here adds work to a request.

import (
	"math"
	"sort"
	"time"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/report"
	"github.com/sluicegw/sluice/rulestore"
)

func init() {
	rulestore.RegisterStateReporter("ratelimit", reportState)
	rulestore.OnTick(sampleExceeded)
}

// EventExceeded is emitted at most once per rule per ExceededEventInterval
// while the rule rejects requests (report.EventExceeded).
const EventExceeded = report.EventExceeded

// ExceededEventInterval is the least time between two ratelimit_exceeded
// events of one rule.
const ExceededEventInterval = report.ExceededEventInterval

// RuleState is one rule in GET /sluice/state.
type RuleState = report.RuleState

// KeyUsage is one key's use of its quota right now.
type KeyUsage = report.KeyUsage

func reportState() any {
	out := []RuleState{}
	for _, l := range liveLimiters() {
		s := l.state.Load()
		if s == nil {
			continue
		}
		rs := RuleState{Rule: l.id, Type: s.rule.Type.String(), Scope: s.rule.Scope, Requests: l.counters.byResult(),
			Keys: s.engine.Keys(), InFlight: s.engine.InFlight(), TopKeys: topKeys(s, l.now(), report.StateTopKeys), Flow: flowStateOf(s)}
		if rs.Scope == "" {
			rs.Scope = "local"
		}
		rs.ExceededHeld = l.exceeded.Held()
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

// sampleExceeded emits each rule's ratelimit_exceeded event that is due
// (report.ExceededSampler).
func sampleExceeded(now time.Time) {
	limiters.Range(func(_ string, l *limiter) bool {
		l.exceeded.Sample(now, l.id, l.counters.byResult(), func() ([]KeyUsage, bool) {
			s := l.state.Load()
			if s == nil {
				return nil, false
			}
			return topKeys(s, l.now(), report.EventTopKeys), true
		})
		return true
	})
}
