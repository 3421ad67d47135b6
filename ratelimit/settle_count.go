package ratelimit

// Settlements at a local rule's entries (settleAt) are counted in their
// shard, under the lock the charge holds; the limiter's counters hold the
// rest (cluster rules, lookups) and, once an engine is replaced, what its
// shards had counted. A scrape sums both under the limiter's mutex, which
// the replacement holds too, so no count is seen twice or missed.

// count counts a settlement of n tokens (a refund when negative) in the
// locked shard s; false when s is retired, for the caller to count it in
// the limiter's counters instead.
func (s *shard) count(n int64) bool {
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

// settled sums what the shards counted.
func (t *table) settled() (charged, refunded uint64) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		charged += s.charged
		refunded += s.refunded
		s.mu.Unlock()
	}
	return charged, refunded
}

// settlementsTo moves what the shards counted to c and retires them: the
// settlements still to come at their entries (requests admitted before
// the engine was replaced) count in c.
func (t *table) settlementsTo(c *ruleCounters) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		c.charged.Add(i, s.charged)
		c.refunded.Add(i, s.refunded)
		s.charged, s.refunded, s.retired = 0, 0, true
		s.mu.Unlock()
	}
}

// settledTokens are the tokens the rule's settlements charged and
// refunded beyond what admission spent, for the metrics.
func (l *limiter) settledTokens() (charged, refunded uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	charged, refunded = l.counters.charged.Load(), l.counters.refunded.Load()
	if s := l.state.Load(); s != nil {
		if e, ok := s.engine.(*localEngine); ok {
			c, r := e.tab.settled()
			charged, refunded = charged+c, refunded+r
		}
	}
	return charged, refunded
}
