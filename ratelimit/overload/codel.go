package overload

// Controlled delay per key, after FQ-CoDel (RFC 8290) and CoDel's use in
// front of servers ("Fail at Scale", Facebook, 2015): a key's queue that
// empties now and then absorbs a burst, and a request in it may wait up
// to max_queue_wait; a key's queue that has not emptied for standingAfter
// is standing, that key asking more than its turns give it, and then
// waiting only adds latency: its waiters that waited longer than the
// target are refused. So a key (or with key_resolver global, a class)
// asking more than its share is held to the target by refusing its own
// requests, and the keys that ask less keep max_queue_wait.

// standingAfter is how long a key's queue must stay non-empty to count as
// standing (CoDel's interval).
const standingAfter = 100_000_000 // 100 ms

// minTarget is the least wait a standing queue keeps. Closed-loop
// clients of a fast service keep a standing queue of a few milliseconds,
// tens on a busy machine: a 5 ms floor refused 3.9 % of them under wrk
// beside two test suites, which waiting would have served.
const minTarget = 50_000_000 // 50 ms

// target is the wait a standing queue is held to: the service's
// uncontended latency, at least minTarget, at most max_queue_wait. Before
// the first probe has measured minRTT, no queue is held to a target.
func (c *Controller) target() int64 {
	return min(max(c.lim.minRTT, minTarget), c.lim.cfg.MaxQueueWait)
}

// expireLocked refuses the waiters of each standing key's queue that
// waited longer than the target (the oldest of a key is its head). At
// most once a millisecond: it looks at every key waiting.
func (c *Controller) expireLocked(now int64) {
	if now-c.lastExpire < 1_000_000 || c.q.n == 0 || c.lim.minRTT == 0 {
		return // until minRTT is measured there is no target: max_queue_wait alone
	}
	c.lastExpire = now
	cutoff := now - c.target()
	for i := range c.q.classes {
		cq := &c.q.classes[i]
		if cq.n == 0 {
			continue
		}
		keys := c.scratch[:0]
		for k := cq.turn; ; {
			if now-k.since >= standingAfter {
				keys = append(keys, k)
			}
			if k = k.next; k == cq.turn {
				break
			}
		}
		for _, k := range keys {
			for k.n > 0 && k.head.since < cutoff { // a key left empty is reset: n 0
				w := k.head
				c.leaveLocked(w, abandoned)
				w.ready <- struct{}{}
			}
		}
		c.scratch = keys[:0]
	}
}
