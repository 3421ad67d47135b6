package ratelimit

// Settlements and debt, observed (the ratelimit_debt event's bookkeeping
// is report.DebtLog): the request path counts what it settles with atomic
// adds on the rule's counters and, only when a charge takes a key into
// debt, keeps a copy of that key for the next event.

import (
	"time"

	"github.com/sluicegw/sluice/ratelimit/report"
	"github.com/sluicegw/sluice/rulestore"
)

func init() {
	rulestore.OnTick(sampleDebt)
}

// EventDebt is emitted at most once per rule per DebtEventInterval while
// settlements take the rule's keys into debt (report.EventDebt).
const EventDebt = report.EventDebt

// DebtEventInterval is the least time between two ratelimit_debt events of
// one rule.
const DebtEventInterval = report.DebtEventInterval

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
	l.debt.Add(key)
}

// sampleDebt emits each rule's ratelimit_debt event that is due.
func sampleDebt(now time.Time) {
	limiters.Range(func(_ string, l *limiter) bool {
		shown := MaskKey
		if s := l.state.Load(); s != nil {
			shown = s.rule.shownKey
		}
		l.debt.Sample(now, l.id, l.counters.debtEntered.Load(), shown)
		return true
	})
}
