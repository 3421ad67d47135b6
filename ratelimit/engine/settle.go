package engine

// settle charges n tokens to key's state in this process; it reports
// whether the charge took the key into debt.
func (e *Local) Settle(r *Spec, key []byte, now, n int64) (debt bool) {
	l := r.LimitsFor(key)
	h := e.tab.hash(key)
	s := e.tab.shardOf(h)
	s.mu.Lock()
	ent := e.tab.getKept(s, key, h, now, r.Idle, max(1, r.MaxKeys/len(e.tab.shards)), e.keeps(r))
	debt = e.charge(ent, r, l, now, n)
	s.mu.Unlock()
	return debt
}

// settleAt is settle for the entry the request was admitted on: index at
// in shard s, whose gen was gen then. While the shard has removed no entry
// since, the entry still holds the key and is charged without a lookup
// (a token bucket as of its last update, without reading the clock: see
// chargeAsOfLast), and the charge is counted in the shard (counted);
// else the key is looked up again, and the caller counts the charge.
func (e *Local) SettleAt(r *Spec, key []byte, ref EntryRef, clock func() int64, n int64) (debt, counted bool) {
	s := ref.shard
	if e.typ != TokenBucket {
		return e.settleWindowAt(r, key, ref, clock(), n)
	}
	s.mu.Lock()
	if s.gen != ref.gen {
		s.mu.Unlock()
		return e.Settle(r, key, clock(), n), false
	}
	// The entry keeps its decision's seen and place in the shard's
	// recency list (ordered by seen): idle time counts from the decision.
	debt = s.at(ref.at).tb.chargeAsOfLast(r.LimitsFor(key).Burst, float64(n))
	counted = s.count(n)
	s.mu.Unlock()
	return debt, counted
}

// settleWindowAt is settleAt for a sliding window or a calendar quota,
// charged at now: the entry is marked used then, as a lookup does.
func (e *Local) settleWindowAt(r *Spec, key []byte, ref EntryRef, now, n int64) (debt, counted bool) {
	s := ref.shard
	s.mu.Lock()
	if s.gen != ref.gen {
		s.mu.Unlock()
		return e.Settle(r, key, now, n), false
	}
	ent := s.at(ref.at)
	ent.seen = now
	s.toFront(ref.at)
	debt = e.charge(ent, r, r.LimitsFor(key), now, n)
	counted = s.count(n)
	s.mu.Unlock()
	return debt, counted
}

// charge charges n tokens to ent under quota l; the caller holds its
// shard's lock.
func (e *Local) charge(ent *entry, r *Spec, l *Limits, now, n int64) (debt bool) {
	switch e.typ {
	case Calendar:
		return chargeCalendar(ent, r, l.Max, now, n)
	case SlidingWindow:
		return ent.sw.charge(now, l.Window, l.Max, float64(n))
	}
	return ent.tb.charge(now, l.QPS, l.Burst, float64(n))
}

// StripeOf picks key's stripe of the settlement counters: its entry's
// index when known, else its last byte (keys differ at the end: ids, IPs).
func StripeOf(key []byte, ref EntryRef) int {
	if ref.at != 0 || len(key) == 0 {
		return int(ref.at)
	}
	return int(key[len(key)-1])
}

// EntryRef is where a local settling rule's decision found its key's
// entry (Decision.at), for its settlement; shard nil: not known.
type EntryRef struct {
	shard *Shard
	at    int32
	gen   uint32
}

// RefOf is d's entry for its settlement.
func RefOf(d *Decision) EntryRef {
	if d.at == 0 {
		return EntryRef{}
	}
	return EntryRef{shard: d.shard, at: d.at, gen: d.gen}
}

// Known reports whether ref names an entry.
func (ref EntryRef) Known() bool { return ref.shard != nil }
