package cluster

import "github.com/sluicegw/sluice/ratelimit/engine"

// What the handler's decision of several cluster limits by one script
// (DecideAll, decide_all.go) does with each rule's engine.

// TakeSlots takes key's in-flight slots of rule r, before Redis.
func (e *Engine) TakeSlots(r *Rule, key []byte, now int64) engine.Decision {
	return e.slots.TakeCost(&r.Spec, key, now, r.Cost)
}

// KnownRefusal refuses d locally when Redis said key has fewer than cost
// tokens until a time not reached yet (as decideExact does).
func (e *Engine) KnownRefusal(r *Rule, key []byte, now, cost int64, d *engine.Decision) {
	s := e.keys.Shard(key)
	s.Lock()
	if ls := leaseOf(e.keys, s, key); ls != nil && ls.refusing(r, now, cost) {
		d.Reason, d.RetryAfter = engine.RateLimited, ls.deniedUntil-now
		d.Remaining, d.Reset = 0, max(0, ls.resetAt-now)
	}
	s.Unlock()
}

// LearnExact remembers what a script told about key (a refusal until some
// time), or forgets a refusal remembered, as decideExact does.
func (e *Engine) LearnExact(r *Rule, key []byte, now, cost int64, g Grant) {
	if g.Wait == 0 {
		s := e.keys.Shard(key)
		s.Lock()
		known := leaseOf(e.keys, s, key)
		s.Unlock()
		if known == nil {
			return
		}
	}
	s, _, ls := e.lockLease(r, key, now)
	ls.learn(r, g, now, cost, e.host.Listed())
	s.Unlock()
}

// FirstWarning reports whether a reply error of Redis is the engine's
// first, the one it logs.
func (e *Engine) FirstWarning() bool { return e.warned.CompareAndSwap(false, true) }

// SettleShare charges n tokens (refunds -n) to key in the local share
// that on_redis_error local decides by.
func (e *Engine) SettleShare(r *Rule, key []byte, now, n int64) {
	e.fallback.Settle(&e.shareOf(r).Spec, key, now, n)
}
