package engine

// Settlements at a local rule's entries (settleAt) are counted in their
// shard, under the lock the charge holds; the limiter's counters hold the
// rest (cluster rules, lookups) and, once an engine is replaced, what its
// shards had counted. A scrape sums both under the limiter's mutex, which
// the replacement holds too, so no count is seen twice or missed.

// count counts a settlement of n tokens (a refund when negative) in the
// locked shard s; false when s is retired, for the caller to count it in
// the limiter's counters instead.
func (s *Shard) count(n int64) bool {
	if s.retired {
		return false
	}
	if n > 0 {
		s.charged += uint64(n)
	} else {
		s.refunded += uint64(-n)
	}
	return true
}

// Settled sums what the shards counted.
func (t *Table) Settled() (charged, refunded uint64) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		charged += s.charged
		refunded += s.refunded
		s.mu.Unlock()
	}
	return charged, refunded
}

// SettlementsTo moves what the shards counted to add (shard i's to stripe
// i) and retires them: the settlements still to come at their entries
// (requests admitted before the engine was replaced) count there.
func (t *Table) SettlementsTo(add func(stripe int, charged, refunded uint64)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		add(i, s.charged, s.refunded)
		s.charged, s.refunded, s.retired = 0, 0, true
		s.mu.Unlock()
	}
}
