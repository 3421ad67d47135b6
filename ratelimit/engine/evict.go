package engine

// Eviction never forgives: a key the table evicts (max_keys) with part of
// its quota spent leaves a trace in its stripe's sketch (sketch.go), and
// the key, coming back, starts from that trace rather than a full quota.
// A key whose state equals a fresh one's leaves nothing, and goes first.

// keeper is what a table needs to keep keys' spent state for rule r at
// now: nil r keeps none (in-flight slots, leases, shaping rules).
type keeper struct {
	r   *Spec
	now int64
	cal int64 // a calendar quota's window start at now, once read
}

// keeps is the rule whose keys' spent state the engine's table keeps
// across eviction: a rule counting a quota in this engine, else nil.
func (e *Local) keeps(r *Spec) *Spec {
	if e.slotsOnly || r.Flow.Behavior != Reject {
		return nil
	}
	return r
}

// calStart is a calendar quota's current window start (Unix ns).
func (k *keeper) calStart() int64 {
	if k.cal == 0 {
		k.cal = k.r.Calendar.Window(Wall(k.now)).Start
	}
	return k.cal
}

func (k *keeper) kind() traceKind {
	if k.r.Type == SlidingWindow {
		return traceWindow
	}
	return traceMax
}

// trace is what entry e of key, under quota l, leaves when evicted now:
// 0 when its state equals a fresh key's.
func (k *keeper) trace(e *entry, l *Limits) uint64 {
	switch k.r.Type {
	case Calendar:
		start := k.calStart()
		if e.sw.start != start {
			return 0 // counted in a past window: a fresh count
		}
		return packTrace(uint32(start/1e9), e.sw.cur)
	case SlidingWindow:
		w := e.sw
		w.advance(k.now, l.Window)
		if w.cur == 0 && w.prev == 0 {
			return 0
		}
		return packTrace(uint32(w.start/l.Window), w.estimate(k.now, l.Window))
	}
	if e.tb.last == 0 {
		return 0
	}
	deficit := l.Burst - e.tb.available(k.now, l.QPS, l.Burst)
	if deficit <= 0 {
		return 0
	}
	return uint64(k.now + CeilNanos(deficit/l.QPS)) // full again then
}

// beyondSketch reports whether evicted entry e of key holds more spent
// than its cells in sk already say, by more than the rule's slack
// (forgiven): only such a key leaves a trace. A key that spent a request
// or two leaves nothing, so a flood of junk keys does not ratchet the
// cells up for the keys that come after it; a key that spent its quota
// does, and a key restored from its trace that spends nothing more finds
// it there again.
func (k *keeper) beyondSketch(sk *evictSketch, e *entry, key []byte) bool {
	l := k.r.LimitsFor(key)
	known := 0.0
	if sk.cells != nil {
		var was entry
		if k.restore(sk, &was, e.hash, l) {
			known = k.spent(&was, l)
		}
	}
	return k.spent(e, l)-known > forgiven(l)
}

// forgiven is what an evicted key may come back owing less than it did:
// a sixteenth of its quota, at least one unit.
func forgiven(l *Limits) float64 { return max(float64(l.Quota)/16, 1) }

// spent is what entry e has spent of quota l at now, debt included.
func (k *keeper) spent(e *entry, l *Limits) float64 {
	switch k.r.Type {
	case Calendar:
		if e.sw.start != k.calStart() {
			return 0
		}
		return float64(e.sw.cur)
	case SlidingWindow:
		w := e.sw
		w.advance(k.now, l.Window)
		return w.estimate(k.now, l.Window)
	}
	if e.tb.last == 0 {
		return 0
	}
	return l.Burst - e.tb.available(k.now, l.QPS, l.Burst)
}

// restore sets a new entry (zero rate state) of key, of table hash h and
// quota l, from its trace in sketch k: what the key left when evicted, or
// more (a key sharing its cells), never less. It reports whether the trace
// held anything.
func (k *keeper) restore(sk *evictSketch, e *entry, h uint64, l *Limits) bool {
	cells := sk.rows(h)
	switch k.r.Type {
	case Calendar:
		j, used := unpackTrace(least(cells))
		start := k.calStart()
		if used == 0 || j != uint32(start/1e9) {
			return false
		}
		e.sw.start, e.sw.cur = start, used
		return true
	case SlidingWindow:
		return restoreWindow(&e.sw, cells, k.now, l.Window)
	}
	full := int64(least(cells))
	if full <= k.now {
		return false
	}
	e.tb = tokenBucket{tokens: l.Burst - float64(full-k.now)*l.QPS/1e9, last: k.now}
	return true
}

// restoreWindow sets w from the key's sliding-window cells at now: each
// is a trace that counts at least what the key left, so the one counting
// least now is taken.
func restoreWindow(w *slidingWindow, cells [sketchRows]uint64, now, size int64) bool {
	start := now - now%size
	k := uint32(start / size)
	var best slidingWindow
	bestEst := -1.0
	for _, c := range cells {
		var r slidingWindow
		if c != 0 {
			j, e := unpackTrace(c)
			switch d := windowsAfter(j, k); {
			case d <= 0: // this window (or one after: the clock went back)
				r = slidingWindow{start: start, cur: e}
			case d == 1:
				r = slidingWindow{start: start, prev: e}
			}
		}
		r.start = start
		if est := r.estimate(now, size); bestEst < 0 || est < bestEst {
			best, bestEst = r, est
		}
	}
	if bestEst <= 0 {
		return false
	}
	*w = best
	return true
}

// PeekTrace is the state key, not in the table, starts from on its next
// request at now under rule r: its eviction trace, if its shard's sketch
// holds one (ok). It changes nothing.
func (e *Local) PeekTrace(r *Spec, key []byte, now int64) (snap Snapshot, ok bool) {
	if e.keeps(r) == nil {
		return snap, false
	}
	h := e.tab.hash(key)
	s := e.tab.shardOf(h)
	k := keeper{r: r, now: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sketch.cells == nil {
		return snap, false
	}
	return snap, k.restore(&s.sketch, &snap.ent, h, r.LimitsFor(key))
}
