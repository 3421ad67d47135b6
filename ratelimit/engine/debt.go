package engine

// debt counts the keys of settling rule r in debt at now and the tokens
// (requests, units) they owe, for the gauges. It reads the table at
// scrape; a rule that does not settle cannot be in debt: none, unread.
func (e *Local) Debt(r *Spec, now int64) (keys int64, owed float64) {
	if !r.Settles || e.slotsOnly {
		return 0, 0
	}
	var calStart int64
	if r.Type == Calendar {
		calStart = r.Calendar.Window(Wall(now)).Start
	}
	e.tab.scan(func(ent *entry, key []byte) {
		if b := ent.balance(r, r.LimitsFor(key), now, calStart); b < 0 {
			keys++
			owed -= b
		}
	})
	return keys, owed
}

// balance is what the entry holds of its quota at now: below zero, its
// debt. It reads a copy, as use does.
func (e *entry) balance(r *Spec, l *Limits, now, calStart int64) float64 {
	switch r.Type {
	case Calendar:
		c := calendarCount{start: e.sw.start, used: e.sw.cur}
		c.advance(calStart)
		return l.Max - c.used
	case SlidingWindow:
		w := e.sw
		w.advance(now, l.Window)
		return l.Max - w.estimate(now, l.Window)
	}
	return e.tb.available(now, l.QPS, l.Burst)
}
