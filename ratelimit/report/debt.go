package report

// Settlements and debt, observed: a settling rule (count_status,
// response_cost) charges its keys after the response, and a charge may
// take a key below zero (debt). The request path counts what it settles
// with atomic adds on the rule's counters and, only when a charge takes a
// key into debt, keeps a copy of that key (DebtLog.Add) for the next
// ratelimit_debt event. Reading the debt (the gauges) and sampling the
// event happen at scrape and on the once-a-second tick.

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// EventDebt is emitted at most once per rule per DebtEventInterval while
// settlements take the rule's keys into debt, with how many did since the
// last one and a few of those keys, masked.
const EventDebt = "ratelimit_debt"

// DebtEventInterval is the least time between two ratelimit_debt events of
// one rule.
const DebtEventInterval = 10 * time.Second

// debtKeysKept is how many of the keys that entered debt since the last
// event are kept for it (the latest ones).
const debtKeysKept = EventTopKeys

// DebtLog is one rule's keys that entered debt since its last event, and
// the event's bookkeeping. The request path writes a key with one atomic
// store into a small ring (the oldest is overwritten); the tick reads it.
// The zero value is ready.
type DebtLog struct {
	keys [debtKeysKept]atomic.Pointer[string]
	next atomic.Uint32

	mu       sync.Mutex
	reported uint64 // entered as of the last event
	lastSent time.Time
}

// Add keeps a copy of key, which a settlement took into debt, for the next
// event.
func (d *DebtLog) Add(key []byte) {
	k := string(key)
	d.keys[d.next.Add(1)%debtKeysKept].Store(&k)
}

// Sample emits rule's ratelimit_debt event if keys entered debt since the
// last one and the interval is over: total counts the settlements that
// took a key into debt since the rule started, shown masks a key as the
// rule shows it.
func (d *DebtLog) Sample(now time.Time, rule string, total uint64, shown func(string) string) {
	d.mu.Lock()
	defer d.mu.Unlock()
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
	masked := make([]string, 0, len(keys))
	seen := map[string]bool{}
	for _, k := range keys {
		if m := shown(k); !seen[m] {
			seen[m] = true
			masked = append(masked, m)
		}
	}
	sort.Strings(masked)
	data := map[string]any{"rule": rule, "entered": entered, "keys": masked}
	if !d.lastSent.IsZero() {
		data["since_seconds"] = now.Sub(d.lastSent).Seconds()
	}
	d.lastSent = now
	rulestore.Emit(EventDebt, data)
}
