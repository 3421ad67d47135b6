package cluster

import (
	"time"

	"go.uber.org/zap"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

// Several cluster limits in one script: when every rule of a request's
// list keeps its count in Redis exactly (scope cluster, no lease, no
// shadow), the request is decided by one multiLua call over all its keys,
// which spends on every rule or on none. No tokens are taken and given
// back, so a refusal by a later rule never shows, even for a moment, in an
// earlier rule's count (the handler's take-then-refund path lets a
// concurrent request see those tokens gone). The call rides in the
// client's next batch like any decision. On a Redis Cluster a script may
// only name keys of one hash slot, and RedisKey tags each state by rule
// and key (so that counts stay where earlier releases kept them): there a
// list falls back to take-then-refund.

// Part is one rule's part in a request decided by several cluster rules
// in one script (DecideAll). The caller sets Rule to Spent; DecideAll sets
// D, Decided and Admitted.
type Part struct {
	Rule   *Rule
	Host   Host
	Engine *Engine
	// The rule's key is kb[KFrom:KTo] of the request's key buffer (a
	// slice kept here would move the caller's buffer to the heap).
	KFrom, KTo int
	Cost       int64 // the request's cost
	Spent      int64 // what admission takes of it (a settling rule: its reserve)

	D        engine.Decision
	Decided  bool // D holds the rule's decision
	Admitted bool // the rule admitted the request, holding its in-flight slots
}

func (p *Part) key(kb []byte) []byte { return kb[p.KFrom:p.KTo:p.KTo] }

// script is one multiLua call: a key and its arguments per part, the
// calendar window a calendar quota decides in, and the longest timeout.
type script struct {
	keys    []string
	args    []any
	wins    []*engine.Window
	walls   []int64
	timeout time.Duration
}

// DecideAll decides ps (keys in kb) by one script. It returns the index of
// the part that refused, or -1 when all admitted; handled is false, with
// nothing taken, when the list cannot be decided so (no Redis, Redis
// marked down, rules on different stores' Redis, keys in several slots of
// a Redis Cluster): the caller then decides rule by rule.
func DecideAll(ps []Part, kb []byte) (refused int, handled bool) {
	ref, g := gateOf(ps)
	if g == nil {
		return -1, false
	}
	s := scriptOf(ps, kb, ref.B.KeyPrefix())
	if !OneSlot(ref.B.Client(), s.keys) {
		return -1, false
	}
	if refused := takeSlots(ps, kb); refused >= 0 {
		return refused, true
	}
	gs, err := g.Batch.RunMulti(s.keys, s.args, s.timeout)
	if err != nil {
		return failAll(ps, kb, ref, g, s.keys, err), true
	}
	return learnAll(ps, kb, &s, gs), true
}

// gateOf is the Redis every part's rule counts in, and its health gate;
// a nil gate when there is none, it is down, or the rules count in
// different stores' Redis.
func gateOf(ps []Part) (*BackendRef, *Gate) {
	ref := ps[0].Host.Backend()
	if ref == nil || ref.B.Client() == nil {
		return nil, nil
	}
	g := ref.B.ClientState(GateKey, NewGate).(*Gate)
	if g.Down.Load() {
		return nil, nil
	}
	for i := range ps {
		if b := ps[i].Host.Backend(); b == nil || b.B != ref.B {
			return nil, nil
		}
	}
	return ref, g
}

// scriptOf is the script deciding ps: per part its Redis key and
// "<type>", two limits, the cost and what admission spends.
func scriptOf(ps []Part, kb []byte, prefix string) script {
	s := script{keys: make([]string, len(ps)), args: make([]any, 0, 5*len(ps)),
		wins: make([]*engine.Window, len(ps)), walls: make([]int64, len(ps))}
	for i := range ps {
		p := &ps[i]
		r, key := p.Rule, p.key(kb)
		l := r.LimitsFor(key)
		switch {
		case r.Calendar != nil:
			s.walls[i] = engine.Wall(p.Host.Now())
			w := r.Calendar.Window(s.walls[i])
			s.wins[i] = w
			s.keys[i] = CalendarRedisKey(prefix, r.ID, key, w.Start)
			s.args = append(s.args, "cq", l.ScriptArgs[1], w.ExpireAt, p.Cost, p.Spent)
		case r.Type == engine.SlidingWindow:
			s.keys[i] = RedisKey(prefix, r.Type, r.ID, key)
			s.args = append(s.args, "sw", l.ScriptArgs[0], l.ScriptArgs[1], p.Cost, p.Spent)
		default:
			s.keys[i] = RedisKey(prefix, r.Type, r.ID, key)
			s.args = append(s.args, "tb", l.ScriptArgs[0], l.ScriptArgs[1], p.Cost, p.Spent)
		}
		s.timeout = max(s.timeout, r.RedisTimeout)
	}
	return s
}

// takeSlots takes every part's in-flight slots and applies the refusals
// Redis told before, locally, before Redis is asked. It returns the index
// of the part refused, its slots and the ones before it freed, or -1.
func takeSlots(ps []Part, kb []byte) int {
	for i := range ps {
		p := &ps[i]
		now := p.Host.Now()
		p.D, p.Decided = p.Engine.TakeSlots(p.Rule, p.key(kb), now), true
		if p.D.OK() {
			p.Admitted = true
			p.Engine.KnownRefusal(p.Rule, p.key(kb), now, p.Cost, &p.D)
		}
		if !p.D.OK() {
			release(ps[:i+1])
			return i
		}
	}
	return -1
}

// learnAll reads the script's grants into the parts' decisions and their
// engines' memory of refusals. It returns the index of the part that
// refused (the first with a wait, else the first without its tokens),
// its request's slots freed, or -1 when every part got its tokens.
func learnAll(ps []Part, kb []byte, s *script, gs []Grant) int {
	refused := -1
	bad := -1 // the first rule without its tokens; one with a wait refused
	for i := range ps {
		p, gr := &ps[i], gs[i]
		p.Engine.counters.RedisCalls.Inc()
		if w := s.wins[i]; w != nil {
			gr.Reset = w.End - s.walls[i]
			if gr.Wait > 0 {
				gr.Wait = gr.Reset
			}
			p.D.Cal = w
		}
		p.D.Remaining, p.D.Reset = gr.Remaining, gr.Reset
		if gr.N < p.Spent || gr.Remaining+gr.N < p.Cost {
			if bad < 0 {
				bad = i
			}
			if gr.Wait > 0 && refused < 0 {
				refused = i
			}
		}
		p.Engine.LearnExact(p.Rule, p.key(kb), p.Host.Now(), p.Cost, gr)
		gs[i] = gr
	}
	if bad < 0 {
		return -1
	}
	if refused < 0 {
		refused = bad
	}
	d := &ps[refused].D
	d.Reason, d.RetryAfter, d.Remaining = engine.RateLimited, gs[refused].Wait, 0
	release(ps)
	return refused
}

// failAll decides ps by each rule's on_redis_error when the script
// failed, rule by rule: a rule that refuses gives back what the ones
// before it took from their local shares. It returns the index of the
// part that refused, or -1.
func failAll(ps []Part, kb []byte, ref *BackendRef, g *Gate, keys []string, err error) int {
	if Unreachable(err) {
		g.Fail(err, keys[0], ref.Logger)
	} else if ps[0].Engine.FirstWarning() && ref.Logger != nil {
		ref.Logger.Warn("cluster rate limit: redis refused the script of several limits; this decision follows on_redis_error",
			zap.String("rule", ps[0].Rule.ID), zap.Error(err))
	}
	for i := range ps {
		p := &ps[i]
		p.Engine.counters.RedisErrors.Inc()
		now := p.Host.Now()
		p.Engine.Fail(p.Rule, p.key(kb), now, p.Cost, &p.D)
		if p.D.OK() {
			continue
		}
		for j := range ps[:i] {
			if q := &ps[j]; q.Rule.OnRedisError == FailLocal {
				q.Engine.SettleShare(q.Rule, q.key(kb), now, -q.Spent)
			}
		}
		release(ps)
		return i
	}
	return -1
}

// release frees the in-flight slots of ps's admitted parts: the request
// was refused before any token was spent.
func release(ps []Part) {
	for i := range ps {
		p := &ps[i]
		if !p.Admitted {
			continue
		}
		if p.D.HoldsSlot() {
			d := p.D
			p.Engine.Release(&d)
			p.D.ForgetSlots()
		}
		p.Admitted = false
	}
}
