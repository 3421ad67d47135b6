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
	ref := ts[0].m.lim.backend.Load()
	if ref == nil || ref.B.Client() == nil {
		return -1, false
	}
	g := ref.B.ClientState(cluster.GateKey, cluster.NewGate).(*cluster.Gate)
	if g.Down.Load() {
		return -1, false
	}
	prefix := ref.B.KeyPrefix()
	keys := make([]string, len(ts))
	args := make([]any, 0, 5*len(ts))
	wins := make([]*engine.Window, len(ts))
	walls := make([]int64, len(ts))
	var timeout time.Duration
	for i := range ts {
		t := &ts[i]
		if b := t.m.lim.backend.Load(); b == nil || b.B != ref.B {
			return -1, false // rules on different stores' Redis
		}
		r := t.m.rule
		l := r.LimitsFor(t.key(kb))
		spend := t.spent()
		switch {
		case r.Calendar != nil:
			walls[i] = engine.Wall(t.m.lim.now())
			w := r.Calendar.Window(walls[i])
			wins[i] = w
			keys[i] = cluster.CalendarRedisKey(prefix, r.ID, t.key(kb), w.Start)
			args = append(args, "cq", l.ScriptArgs[1], w.ExpireAt, t.cost, spend)
		case r.Type == SlidingWindow:
			keys[i] = cluster.RedisKey(prefix, r.Type, r.ID, t.key(kb))
			args = append(args, "sw", l.ScriptArgs[0], l.ScriptArgs[1], t.cost, spend)
		default:
			keys[i] = cluster.RedisKey(prefix, r.Type, r.ID, t.key(kb))
			args = append(args, "tb", l.ScriptArgs[0], l.ScriptArgs[1], t.cost, spend)
		}
		timeout = max(timeout, r.RedisTimeout)
	}
	if !cluster.OneSlot(ref.B.Client(), keys) {
		return -1, false
	}
	// In-flight caps and the refusals Redis told, locally, before Redis.
	for i := range ts {
		t := &ts[i]
		e := t.eng.(*clusterEngine)
		now := t.m.lim.now()
		t.d, t.decided = e.TakeSlots(&t.m.rule.Rule, t.key(kb), now), true
		if t.d.OK() {
			t.admitted = true
			e.KnownRefusal(&t.m.rule.Rule, t.key(kb), now, t.cost, &t.d)
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
		now := t.m.lim.now()
		t.m.lim.counters.redisCalls.Inc()
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
		e.LearnExact(&t.m.rule.Rule, t.key(kb), now, t.cost, gr)
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
func failAtomic(ts []taken, kb []byte, ref *cluster.BackendRef, g *cluster.Gate, keys []string, err error) int {
	e0 := ts[0].eng.(*clusterEngine)
	if cluster.Unreachable(err) {
		g.Fail(err, keys[0], ref.Logger)
	} else if e0.FirstWarning() && ref.Logger != nil {
		ref.Logger.Warn("cluster rate limit: redis refused the script of several limits; this decision follows on_redis_error",
			zap.String("rule", ts[0].m.rule.ID), zap.Error(err))
	}
	for i := range ts {
		t := &ts[i]
		e := t.eng.(*clusterEngine)
		t.m.lim.counters.redisErrors.Inc()
		now := t.m.lim.now()
		e.Fail(&t.m.rule.Rule, t.key(kb), now, t.cost, &t.d)
		if t.d.OK() {
			continue
		}
		for j := range ts[:i] {
			p := &ts[j]
			if p.m.rule.OnRedisError == FailLocal {
				pe := p.eng.(*clusterEngine)
				pe.SettleShare(&p.m.rule.Rule, p.key(kb), now, -p.spent())
			}
		}
		release(ts)
		return i
	}
	return -1
}
