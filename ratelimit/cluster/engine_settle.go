package cluster

import (
	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/ratelimit/engine"
)

// Settle charges n tokens to key's state in Redis, riding in the next
// batch of the client's decisions, and waits for it (at most
// redis_timeout): the response's status goes out only after the charge is
// in Redis, so a client's next request is decided on it. A charge Redis
// does not take in time is lost (the key is undercharged, never over).
// While Redis is down (or absent) it charges the local share that
// on_redis_error local decides by. applied is false for a lost charge;
// debt is Redis's answer (or the local share's) whether this charge took
// the key into debt: it rides in the same reply, no further call.
func (e *Engine) Settle(r *Rule, key []byte, now, n int64) (applied, debt bool) {
	ref := e.host.Backend()
	var c redis.UniversalClient
	if ref != nil {
		c = ref.B.Client()
	}
	if c == nil {
		return true, e.fallback.Settle(&r.Spec, key, now, n)
	}
	g := ref.B.ClientState(GateKey, NewGate).(*Gate)
	if g.Down.Load() {
		return true, e.fallback.Settle(&e.shareOf(r).Spec, key, now, n)
	}
	if r.Calendar != nil {
		applied, debt = e.settleCalendar(g.Batch, ref.B.KeyPrefix(), r, key, now, n)
	} else {
		eng := "tb"
		if e.typ == engine.SlidingWindow {
			eng = "sw"
		}
		l := r.LimitsFor(key)
		res, err := g.Batch.RunScript(SettleScript, false, RedisKey(ref.B.KeyPrefix(), e.typ, r.ID, key), [4]any{eng, l.ScriptArgs[0], l.ScriptArgs[1], n}, r.RedisTimeout)
		applied, debt = err == nil, err == nil && res.Wait != 0
	}
	if applied {
		e.forgetRefusal(key)
	}
	return applied, debt
}

// forgetRefusal drops what this instance remembers of Redis refusing key:
// a charge moved the time the key has tokens again further away (a refund
// nearer), so the next request asks Redis and tells its client the true
// wait.
func (e *Engine) forgetRefusal(key []byte) {
	s := e.keys.Shard(key)
	s.Lock()
	if ls := leaseOf(e.keys, s, key); ls != nil {
		ls.deniedUntil, ls.deniedBy = 0, nil
	}
	s.Unlock()
}
