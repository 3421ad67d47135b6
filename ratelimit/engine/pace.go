package engine

// pacer is one key's schedule for control_behavior pace: the generic cell
// rate algorithm in its "virtual scheduling" form. tat (theoretical arrival
// time) is the earliest moment the next request may go; each admitted
// request takes the slot max(tat, now) and moves tat one interval on. A
// request whose slot lies within maxWait waits for it (the caller sleeps,
// this only does arithmetic); one further away is refused, and told how
// long until a request would fit. Times are ns from the caller's clock, so
// it is plain arithmetic: no clock reads, no allocation. The caller
// serialises access.
type pacer struct {
	tat int64
}

// slot returns the wait in ns until the next request's slot at now (0 when
// it may go at once).
func (p *pacer) slot(now int64) int64 {
	if p.tat <= now {
		return 0
	}
	return p.tat - now
}

// commit takes the slot that slot(now) returned and schedules the next one
// interval ns later.
func (p *pacer) commit(now, interval int64) {
	p.tat = max(p.tat, now) + interval
}

// paceDecision decides one request: wait is how long it must wait for its
// slot; when ok is false the slot is beyond maxWait and retry is how long
// until a request would get a slot within maxWait (assuming no other
// request meanwhile).
func (p *pacer) take(now, interval, maxWait int64) (wait int64, ok bool, retry int64) {
	wait = p.slot(now)
	if wait > maxWait {
		return wait, false, wait - maxWait
	}
	p.commit(now, interval)
	return wait, true, 0
}

// remaining is how many more requests could take a slot within maxWait at
// now.
func (p *pacer) remaining(now, interval, maxWait int64) int64 {
	free := now + maxWait - max(p.tat, now)
	if free < 0 {
		return 0
	}
	return free/interval + 1
}
