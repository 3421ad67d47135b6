package ratelimit

// Settlements and debt, observed: a settling rule (count_status,
// response_cost) charges its keys after the response, and a charge may
// take a key below zero (debt). The request path counts what it settles
// with atomic adds on the rule's counters and, only when a charge takes a
// key into debt, keeps a copy of that key for the next ratelimit_debt
// event. Reading the debt (the gauges) and sampling the event happen at
// scrape and on the once-a-second tick.

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

func init() {
	rulestore.OnTick(sampleDebt)
}

// EventDebt is emitted at most once per rule per DebtEventInterval while
// settlements take the rule's keys into debt, with how many did since the
// last one and a few of those keys, masked.
const EventDebt = "ratelimit_debt"

// DebtEventInterval is the least time between two ratelimit_debt events of
// one rule.
const DebtEventInterval = 10 * time.Second

// debtKeysKept is how many of the keys that entered debt since the last
// event are kept for it (the latest ones).
const debtKeysKept = eventTopKeys

// debtLog is one rule's keys that entered debt since its last event, and
// the event's bookkeeping. The request path writes a key with one atomic
// store into a small ring (the oldest is overwritten); the tick reads it.
type debtLog struct {
	keys [debtKeysKept]atomic.Pointer[string]
	next atomic.Uint32

	mu       sync.Mutex
	reported uint64 // debtEntered as of the last event
	lastSent time.Time
}

// counted counts a settlement applied to key: charge tokens beyond what
// the request spent at admission (a refund when negative), and whether it
// took the key into debt. Atomic adds only, to the counters' stripe picks
// (the key's entry, say: concurrent requests of other keys add to other
// cache lines); a key entering debt is copied (one allocation, on that
// charge only) for the next event.
func (l *limiter) counted(charge int64, debt bool, key []byte, stripe int) {
	c := l.counters
	if charge > 0 {
		c.charged.Add(stripe, uint64(charge))
	} else {
		c.refunded.Add(stripe, uint64(-charge))
	}
	if debt {
		l.enteredDebt(key)
	}
}

// enteredDebt counts a settlement that took key into debt and keeps a
// copy of key for the next event.
func (l *limiter) enteredDebt(key []byte) {
	l.counters.debtEntered.Inc()
	k := string(key)
	l.debt.keys[l.debt.next.Add(1)%debtKeysKept].Store(&k)
}

func sampleDebt(now time.Time) {
	limiters.Range(func(_ string, l *limiter) bool {
		l.debt.sample(now, l)
		return true
	})
}

// sample emits the rule's ratelimit_debt event if keys entered debt since
// the last one and the interval is over.
func (d *debtLog) sample(now time.Time, l *limiter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	total := l.counters.debtEntered.Load()
	if total == d.reported || now.Sub(d.lastSent) < DebtEventInterval {
		return
	}
	entered := total - d.reported
	d.reported = total
	var keys []string
	for i := range d.keys {
		if k := d.keys[i].Swap(nil); k != nil {
			keys = append(keys, *k)
		}
	}
	if !rulestore.ShouldEmit(EventDebt) {
		return // nobody listens: no backlog for a later subscriber
	}
	shown := MaskKey
	if s := l.state.Load(); s != nil {
		shown = s.rule.shownKey
	}
	masked := make([]string, 0, len(keys))
	seen := map[string]bool{}
	for _, k := range keys {
		if m := shown(k); !seen[m] {
			seen[m] = true
			masked = append(masked, m)
		}
	}
	sort.Strings(masked)
	data := map[string]any{"rule": l.id, "entered": entered, "keys": masked}
	if !d.lastSent.IsZero() {
		data["since_seconds"] = now.Sub(d.lastSent).Seconds()
	}
	d.lastSent = now
	rulestore.Emit(EventDebt, data)
}
