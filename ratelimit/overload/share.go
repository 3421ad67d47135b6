package overload

// Fair shares of the slots between keys. A key whose queue stands (has
// not emptied for standingAfter, as controlled delay reads it: codel.go)
// asks more than its turns give it; a key whose queue empties now and then,
// or that has none, asks less than its share. Max-min fairness gives the
// second all it asks and the first what is left. Round robin alone does
// not: with a standing key keeping every slot busy, a request of another
// key, served first or not, waits for the next slot to free, so the other
// keys together queue as a single server does at the load they ask (0.8
// of the slots: their p99 rose 1.5–1.7 ×, almost all of it waiting).
//
// So the slots a standing key holds are on loan. A request of a key whose
// queue does not stand may take a slot over the limit while fewer
// requests are over it than the standing keys hold:
//
//	in flight − held by standing keys < limit
//
// and a standing key gets a slot only under the limit. The others then
// find a slot at once as they would without the standing key, which gets
// what they leave; the requests over the limit drain within one of the
// standing key's requests, since it is given none while in flight is at
// or over the limit. In flight stays below twice the limit, in practice
// the limit plus a few. This is the rule of the partitioned limiter in
// Netflix's concurrency-limits (a partition within its share is admitted
// over the limit, one beyond it only under it), the partitions being the
// keys and a key beyond its share one whose queue stands. Borrowing keeps
// the order of classes: a request borrows only if no more important class
// waits.
//
// Only requests admitted under the queue's lock are on a key's account: a
// request admitted without it (a slot free and nobody waiting) belongs to
// no key, and its slot frees within one service time of a queue forming.

// keyState is one key's account across classes, while it waits or holds
// a slot taken under the lock.
type keyState struct {
	key      string
	inflight int64 // slots it holds
	waiting  int64 // its waiters, all classes
	standing bool  // one of its queues stands (marked by markStandingLocked)
}

// keyLocked is key's account, opened if it was not.
func (c *Controller) keyLocked(key []byte) *keyState {
	if ks := c.keys[string(key)]; ks != nil {
		return ks
	}
	if c.keys == nil {
		c.keys = make(map[string]*keyState)
	}
	var ks *keyState
	if n := len(c.freeKeys); n > 0 {
		ks, c.freeKeys = c.freeKeys[n-1], c.freeKeys[:n-1]
		if ks.key != string(key) {
			ks.key = string(key)
		}
	} else {
		ks = &keyState{key: string(key)}
	}
	c.keys[ks.key] = ks
	return ks
}

// addWaitingLocked counts d more (or fewer) waiters of ks; the account
// closes when it neither waits nor holds a slot.
func (c *Controller) addWaitingLocked(ks *keyState, d int64) {
	ks.waiting += d
	if ks.waiting == 0 && ks.standing { // its queue emptied: it stands no more
		ks.standing = false
		c.loaned -= ks.inflight
	}
	c.idleLocked(ks)
}

// addInflightLocked counts d more (or fewer) slots held by ks.
func (c *Controller) addInflightLocked(ks *keyState, d int64) {
	ks.inflight += d
	if ks.standing {
		c.loaned += d
	}
	c.idleLocked(ks)
}

// idleLocked closes ks's account if it neither waits nor holds a slot,
// for reuse: no ticket or waiter names it then, and it does not stand (a
// key stands no more when its queue empties), so the standing list of the
// last mark may still name it, harmlessly: the next mark clears and
// recomputes every flag.
func (c *Controller) idleLocked(ks *keyState) {
	if ks.inflight == 0 && ks.waiting == 0 && c.keys[ks.key] == ks {
		delete(c.keys, ks.key)
		c.freeKeys = append(c.freeKeys, ks)
	}
}

// markStandingLocked marks the keys with a standing queue (CoDel's: not
// empty for standingAfter) and sums the slots they hold; at most once a
// millisecond.
func (c *Controller) markStandingLocked(now int64) {
	if now-c.lastMark < 1_000_000 && c.lastMark != 0 {
		return
	}
	c.lastMark = now
	for _, ks := range c.standing {
		ks.standing = false
	}
	c.standing, c.loaned = c.standing[:0], 0
	for i := range c.q.classes {
		cq := &c.q.classes[i]
		if cq.turn == nil {
			continue
		}
		for k := cq.turn; ; {
			if now-k.since >= standingAfter && !k.ks.standing {
				k.ks.standing = true
				c.standing = append(c.standing, k.ks)
				c.loaned += k.ks.inflight
			}
			if k = k.next; k == cq.turn {
				break
			}
		}
	}
}

// mayBorrowLocked reports whether a request of a key whose queue does not
// stand, of class, may take a slot with n in flight under limit lim: no
// more important class waits, and fewer requests are over the limit than
// the standing keys hold.
func (c *Controller) mayBorrowLocked(ks *keyState, class Class, n, lim int64) bool {
	if ks.standing || !c.borrowRoom(n, lim) {
		return false
	}
	for i := Class(0); i < class; i++ {
		if c.q.classes[i].n > 0 {
			return false
		}
	}
	return true
}

// borrowRoom: fewer requests over the limit lim than the standing keys
// hold (with n in flight). Not during a probe: minRTT is the latency at
// the probe's concurrency, and requests over it would measure a queue.
func (c *Controller) borrowRoom(n, lim int64) bool {
	if c.lim.probing {
		return n < lim
	}
	return n-c.loaned < lim
}
