package ratelimit

import (
	"context"
	"errors"
	"net"
	"slices"
	"time"
)

// A decision's redis_timeout is counted from when its batch is written to
// Redis, not from when it asked: on a busy host the time a decision spends
// queued behind the scheduler (the flusher not yet run, the requests
// ahead of it) is the host's delay, not Redis's, and counting it sent
// healthy decisions to on_redis_error (with deny, a 503 each, and the
// health gate down for every other decision until the probe answered).
// Before its write a decision waits at most one more redis_timeout
// (queuedDeadline), and a batch that times out gives up the decisions
// queued behind it at once (timeOutPending): a hung Redis still costs a
// decision no more than one redis_timeout past the first write it
// waited behind, and twice redis_timeout at most in all.

// schedLate is how late the deadline timer may fire before the batcher
// takes it for the host not running this process (schedGrace): a timer
// fires within a few hundred µs on a host with CPU to spare.
const schedLate = 5 * time.Millisecond

// schedGrace: a decision due when the timer fired late by d waits up to d
// more, once, at most its redis_timeout: the time this process was not
// run is not Redis's. Together with a batch's deadline counted from its
// write, this keeps a busy host from sending healthy decisions to
// on_redis_error; a hung Redis still costs a decision at most about
// twice its redis_timeout, plus the time the host did not run it.

// queuedDeadline is the deadline of a decision asking at now, until its
// batch is written (writingLocked moves it to the write + timeout).
func queuedDeadline(now time.Time, timeout time.Duration) time.Time {
	return now.Add(2 * timeout)
}

// writingLocked counts each decision of batch, written at now, from then:
// its deadline moves to now + its timeout if that is earlier. It returns
// how long the batch's connection waits: a redis_timeout beyond the
// latest deadline, so an answer this process was too busy to read in time
// is still read for the decisions the watch gave a grace (schedGrace).
// b.mu is held: the watch changes deadlines under it.
func (b *batcher) writingLocked(batch []*scriptCall, now time.Time) (until time.Time) {
	var first time.Time
	for _, c := range batch {
		if d := now.Add(c.timeout); d.Before(c.deadline) {
			c.deadline = d
		}
		if first.IsZero() || c.deadline.Before(first) {
			first = c.deadline
		}
		if u := c.deadline.Add(c.timeout); u.After(until) {
			until = u
		}
	}
	b.watchLocked(first)
	return until
}

// timeOutPending gives up the decisions not yet written whose timeout is
// at most waited: the batch ahead of them waited that long for nothing.
func (b *batcher) timeOutPending(waited time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.pending {
		if c.timeout <= waited {
			c.timeOut()
		}
	}
}

// isTimeout: a deadline passed (a context's, or go-redis's on a
// connection).
func isTimeout(err error) bool {
	if err == nil {
		return false // before ne, which escapes: no allocation per batch
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// The batcher keeps its decisions' redis_timeout with one timer, armed at
// the earliest deadline it knows of, instead of a timer per decision: a
// decision then waits on its done channel alone, and under load the timer
// fires about once per redis_timeout to find nothing due, where a timer
// per decision cost a reset, a stop and a two-way select every time.
// Both the waiting decisions and those in flight
// are watched, so a decision stops waiting at its deadline whatever its
// batch does; a flusher skips the ones timed out before it sends them.

// watchLocked makes sure the timer fires by deadline. b.mu is held.
func (b *batcher) watchLocked(deadline time.Time) {
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
// timer for the earliest one left. A timer that fires late shows this
// process was not run meanwhile: the answers due may be read but not yet
// handled, so each decision due gets that delay once more (schedGrace).
func (b *batcher) expire() {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	late := now.Sub(b.watchAt)
	var next time.Time
	visit := func(c *scriptCall) {
		if c.state.Load() != callWaiting {
			return
		}
		if !c.deadline.After(now) && late > schedLate && !c.graced {
			c.graced = true
			c.deadline = now.Add(min(late, c.timeout))
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
func (b *batcher) land(batch []*scriptCall) {
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
