package engine

import "hash/maphash"

// Snapshot is a copy of one key's state, read without changing the
// table.
type Snapshot struct{ ent entry }

// Peek copies key's entry if the table holds it, leaving the table as it
// was (no entry made, no recency moved, nothing expired).
func (e *Local) Peek(key []byte) (Snapshot, bool) {
	s := e.tab.Shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := e.tab.lookupHashed(s, key, maphash.Bytes(e.tab.seed, key)); i != 0 {
		return Snapshot{*s.at(i)}, true
	}
	return Snapshot{}, false
}

// Spent is what the key has spent of quota l at now under rule r, debt
// included, and the ns until its quota is whole again (token bucket) or
// its window ends (sliding window); for a calendar quota, what it spent in
// the window starting at calStart (Unix ns).
func (s *Snapshot) Spent(r *Spec, l *Limits, now, calStart int64) (spent float64, reset int64) {
	switch r.Type {
	case Calendar:
		c := calendarCount{start: s.ent.sw.start, used: s.ent.sw.cur}
		c.advance(calStart)
		return c.used, 0
	case SlidingWindow:
		return WindowSpent(s.ent.sw.start, s.ent.sw.cur, s.ent.sw.prev, now, l.Window)
	}
	return BucketSpent(s.ent.tb.last, s.ent.tb.tokens, now, l.QPS, l.Burst)
}

// WindowSpent is what a sliding window of size ns, counting cur in the
// window from start and prev in the one before, has spent at now, and the
// ns until its window ends.
func WindowSpent(start int64, cur, prev float64, now, size int64) (spent float64, reset int64) {
	sw := slidingWindow{start: start, cur: cur, prev: prev}
	sw.advance(now, size)
	return sw.estimate(now, size), sw.untilWindowEnd(now, size)
}

// BucketSpent is what a token bucket holding tokens at last (0: a new,
// full bucket) has spent of burst at now, and the ns until it is full.
func BucketSpent(last int64, tokens float64, now int64, qps, burst float64) (spent float64, full int64) {
	tb := tokenBucket{last: last, tokens: tokens}
	tb.refill(now, qps, burst)
	return burst - tb.tokens, tb.untilFull(qps, burst)
}

// Balance is what the key holds of quota l at now under rule r: below
// zero, its debt; calStart is a calendar quota's window start (Unix ns).
func (s *Snapshot) Balance(r *Spec, l *Limits, now, calStart int64) float64 {
	return s.ent.balance(r, l, now, calStart)
}
