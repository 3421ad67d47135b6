package cluster

import (
	"slices"
	"time"
)

// The batcher keeps its decisions' redis_timeout with one timer, armed at
// the earliest deadline it knows of, instead of a timer per decision: a
// decision then waits on its done channel alone, and under load the timer
// fires about once per redis_timeout to find nothing due, where a timer
// per decision cost a reset, a stop and a two-way select every time.
// Both the waiting decisions and those in flight
// are watched, so a decision stops waiting at its deadline whatever its
// batch does; a flusher skips the ones timed out before it sends them.

// watchLocked makes sure the timer fires by deadline. b.mu is held.
func (b *Batcher) watchLocked(deadline time.Time) {
	if !b.watchAt.IsZero() && !deadline.Before(b.watchAt) {
		return
	}
	b.watchAt = deadline
	if b.watch == nil {
		b.watch = time.AfterFunc(time.Until(deadline), b.expire)
		return
	}
	b.watch.Reset(time.Until(deadline))
}

// expire times out the decisions whose deadline has passed and arms the
// timer for the earliest one left.
func (b *Batcher) expire() {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	var next time.Time
	visit := func(c *scriptCall) {
		if c.state.Load() != callWaiting {
			return
		}
		if !c.deadline.After(now) {
			c.timeOut()
			return
		}
		if next.IsZero() || c.deadline.Before(next) {
			next = c.deadline
		}
	}
	for _, c := range b.pending {
		visit(c)
	}
	for _, batch := range b.flying {
		for _, c := range batch {
			visit(c)
		}
	}
	b.watchAt = time.Time{}
	if !next.IsZero() {
		b.watchLocked(next)
	}
}

// land forgets a batch whose answers are in.
func (b *Batcher) land(batch []*scriptCall) {
	if len(batch) == 0 {
		return // never in flight
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, f := range b.flying {
		if &f[0] == &batch[0] {
			b.flying = slices.Delete(b.flying, i, i+1)
			return
		}
	}
}
