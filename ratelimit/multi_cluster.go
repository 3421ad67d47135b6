package ratelimit

import (
	"time"

	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"go.uber.org/zap"
)

// Several cluster limits in one script: when every rule of a request's
// list keeps its count in Redis exactly (scope cluster, no lease, no
// shadow), the request is decided by one multiLua call over all its keys,
// which spends on every rule or on none. No tokens are taken and given
// back, so a refusal by a later rule never shows, even for a moment, in an
// earlier rule's count (the take-then-refund path, serveMulti, lets a
// concurrent request see those tokens gone). The call rides in the
// client's next batch like any decision. On a Redis Cluster a script may
// only name keys of one hash slot, and redisKey tags each state by rule
// and key (so that counts stay where earlier releases kept them): there a
// list falls back to take-then-refund.

// atomicFits reports whether rule r can be decided with the others in
// one script: exact cluster counting, refusals that count.
func atomicFits(r *Rule) bool {
	return r.Cluster() && r.LeaseSize == 0 && !r.Shadow && r.Flow.Behavior == Reject && r.Flow.Adaptive == nil
}

// decideAtomic decides ts (keys in kb and costs set, engines cluster engines)
// by one script. It returns the index of the rule that refused, or -1
// when all admitted (each ts[i].admitted, holding its in-flight slot);
// handled is false, with nothing taken, when the list cannot be decided so
// (no Redis, Redis marked down, keys in several slots of a Redis Cluster):
// the caller then decides rule by rule.
func decideAtomic(ts []taken, kb []byte) (refused int, handled bool) {
	e0 := ts[0].eng.(*clusterEngine)
	ref := e0.lim.backend.Load()
	if ref == nil || ref.b.Client() == nil {
		return -1, false
	}
	g := ref.b.ClientState(cluster.GateKey, cluster.NewGate).(*cluster.Gate)
	if g.Down.Load() {
		return -1, false
	}
	prefix := ref.b.KeyPrefix()
	keys := make([]string, len(ts))
	args := make([]any, 0, 5*len(ts))
	wins := make([]*engine.Window, len(ts))
	walls := make([]int64, len(ts))
	var timeout time.Duration
	for i := range ts {
		t := &ts[i]
		e := t.eng.(*clusterEngine)
		if b := e.lim.backend.Load(); b == nil || b.b != ref.b {
			return -1, false // rules on different stores' Redis
		}
		r := t.m.rule
		l := r.LimitsFor(t.key(kb))
		spend := t.spent()
		switch {
		case r.Calendar != nil:
			walls[i] = engine.Wall(e.lim.now())
			w := r.Calendar.Window(walls[i])
			wins[i] = w
			keys[i] = cluster.CalendarRedisKey(prefix, r.ID, t.key(kb), w.Start)
			args = append(args, "cq", l.ScriptArgs[1], w.ExpireAt, t.cost, spend)
		case e.typ == SlidingWindow:
			keys[i] = cluster.RedisKey(prefix, e.typ, r.ID, t.key(kb))
			args = append(args, "sw", l.ScriptArgs[0], l.ScriptArgs[1], t.cost, spend)
		default:
			keys[i] = cluster.RedisKey(prefix, e.typ, r.ID, t.key(kb))
			args = append(args, "tb", l.ScriptArgs[0], l.ScriptArgs[1], t.cost, spend)
		}
		timeout = max(timeout, r.RedisTimeout)
	}
	if !cluster.OneSlot(ref.b.Client(), keys) {
		return -1, false
	}
	// In-flight caps and the refusals Redis told, locally, before Redis.
	for i := range ts {
		t := &ts[i]
		e := t.eng.(*clusterEngine)
		now := e.lim.now()
		t.d, t.decided = e.slots.Take(t.m.rule, t.key(kb), now), true
		if t.d.OK() {
			t.admitted = true
			e.knownRefusal(t.m.rule, t.key(kb), now, t.cost, &t.d)
		}
		if !t.d.OK() {
			release(ts[:i+1])
			return i, true
		}
	}
	gs, err := g.Batch.RunMulti(keys, args, timeout)
	if err != nil {
		return failAtomic(ts, kb, ref, g, keys, err), true
	}
	refused = -1
	bad := -1 // the first rule without its tokens; one with a wait refused
	for i := range ts {
		t, gr := &ts[i], gs[i]
		e := t.eng.(*clusterEngine)
		now := e.lim.now()
		e.lim.counters.redisCalls.Inc()
		if w := wins[i]; w != nil {
			gr.Reset = w.End - walls[i]
			if gr.Wait > 0 {
				gr.Wait = gr.Reset
			}
			t.d.Cal = w
		}
		t.d.Remaining, t.d.Reset = gr.Remaining, gr.Reset
		if gr.N < t.spent() || gr.Remaining+gr.N < t.cost {
			if bad < 0 {
				bad = i
			}
			if gr.Wait > 0 && refused < 0 {
				refused = i
			}
		}
		e.learnExact(t.m.rule, t.key(kb), now, t.cost, gr)
		gs[i] = gr
	}
	if bad < 0 {
		return -1, true
	}
	if refused < 0 {
		refused = bad
	}
	d := &ts[refused].d
	d.Reason, d.RetryAfter, d.Remaining = RateLimited, gs[refused].Wait, 0
	release(ts)
	return refused, true
}

// knownRefusal refuses d locally when Redis said key has fewer than cost
// tokens until a time not reached yet (as decideExact does).
func (e *clusterEngine) knownRefusal(r *Rule, key []byte, now, cost int64, d *Decision) {
	s := e.keys.Shard(key)
	s.Lock()
	if ls := leaseOf(e.keys, s, key); ls != nil && ls.refusing(r, now, cost) {
		d.Reason, d.RetryAfter = RateLimited, ls.deniedUntil-now
		d.Remaining, d.Reset = 0, max(0, ls.resetAt-now)
	}
	s.Unlock()
}

// learnExact remembers what a script told about key (a refusal until some
// time), or forgets a refusal remembered, as decideExact does.
func (e *clusterEngine) learnExact(r *Rule, key []byte, now, cost int64, g cluster.Grant) {
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
	ls.learn(r, g, now, cost, e.lim.listed.Load())
	s.Unlock()
}

// release frees the in-flight slots of ts's admitted rules: the request
// was refused before any token was spent.
func release(ts []taken) {
	for i := range ts {
		if ts[i].admitted {
			ts[i].release()
			ts[i].admitted = false
		}
	}
}

// failAtomic decides ts by each rule's on_redis_error when the script
// failed, rule by rule: a rule that refuses gives back what the ones
// before it took from their local shares.
func failAtomic(ts []taken, kb []byte, ref *backendRef, g *cluster.Gate, keys []string, err error) int {
	e0 := ts[0].eng.(*clusterEngine)
	if cluster.Unreachable(err) {
		g.Fail(err, keys[0], ref.logger)
	} else if e0.warned.CompareAndSwap(false, true) && ref.logger != nil {
		ref.logger.Warn("cluster rate limit: redis refused the script of several limits; this decision follows on_redis_error",
			zap.String("rule", ts[0].m.rule.ID), zap.Error(err))
	}
	for i := range ts {
		t := &ts[i]
		e := t.eng.(*clusterEngine)
		e.lim.counters.redisErrors.Inc()
		now := e.lim.now()
		e.fail(t.m.rule, t.key(kb), now, t.cost, &t.d)
		if t.d.OK() {
			continue
		}
		for j := range ts[:i] {
			p := &ts[j]
			if p.m.rule.OnRedisError == FailLocal {
				pe := p.eng.(*clusterEngine)
				pe.fallback.settle(pe.shareOf(p.m.rule), p.key(kb), now, -p.spent())
			}
		}
		release(ts)
		return i
	}
	return -1
}
