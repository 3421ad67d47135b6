package report

import (
	"sync"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// EventExceeded is emitted at most once per rule per ExceededEventInterval
// while the rule rejects requests, with the rejections since the last one.
const EventExceeded = "ratelimit_exceeded"

// ExceededEventInterval is the least time between two ratelimit_exceeded
// events of one rule.
const ExceededEventInterval = 10 * time.Second

// ExceededSampler is one rule's ratelimit_exceeded bookkeeping: once a
// second the rule's rejection counters are read; a rule whose count grew
// gets one event, then none for ExceededEventInterval (its rejections
// meanwhile go in the next event). Each limiter keeps its own, so it goes
// with the rule id. The zero value is ready.
type ExceededSampler struct {
	mu       sync.Mutex
	reported map[string]int64 // counts as of the last event
	lastSent time.Time
	held     int64 // refusals seen since the last event, waiting for the interval
}

// Held counts the refusals seen but held for the next event.
func (sm *ExceededSampler) Held() int64 {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.held
}

// rejecting are the results that mean the limit was exceeded.
var rejecting = [...]string{"rejected", "concurrency_rejected", "empty_key_rejected", "redis_unavailable"}

// Sample emits rule's event if its refusals grew and the interval is
// over; c are its counters by result, top its top keys when it has a rule
// in force (ok false: none to list).
func (sm *ExceededSampler) Sample(now time.Time, rule string, c map[string]int64, top func() ([]KeyUsage, bool)) {
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
	data := map[string]any{"rule": rule, "rejected": total, "by_result": delta,
		"allowed": c["allowed"] - sm.reported["allowed"]}
	if !sm.lastSent.IsZero() {
		data["since_seconds"] = now.Sub(sm.lastSent).Seconds()
	}
	if keys, ok := top(); ok {
		data["top_keys"] = keys
	}
	for res, v := range c {
		sm.reported[res] = v
	}
	sm.lastSent, sm.held = now, 0
	rulestore.Emit(EventExceeded, data)
}
