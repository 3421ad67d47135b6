package ratelimit

import (
	"bytes"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// taken is one rule's part in a request (pipeline.go).
type taken struct {
	m        member
	eng      Engine
	kfrom    int // the rule's key is kb[kfrom:kto] of its request's key
	kto      int // buffer (a slice kept here would move the buffer to the heap)
	cost     int64
	d        Decision
	decided  bool          // d holds the rule's decision
	skip     bool          // a shadow rule without a key: not decided
	admitted bool          // the rule admitted it: its tokens are spent
	sw       *settleWriter // while served: the rule's settle writer
	nest     *nestWalk     // a rule with a parent: its path (nested_decide.go)
}

// key is the rule's key in kb, the request's key buffer.
func (t *taken) key(kb []byte) []byte { return kb[t.kfrom:t.kto:t.kto] }

// spent is what an admitted request took from the rule's quota when
// admitted (a settling rule takes its reserve; the rest comes after).
func (t *taken) spent() int64 {
	if t.m.rule.Settles {
		return t.m.rule.Reserve
	}
	return t.cost
}

// release frees the rule's in-flight slots, if it holds any. The engine
// gets a copy of the decision: an address given to an interface method
// escapes, and with ts's own it would move every request's ts to the heap.
func (t *taken) release() {
	if t.d.HoldsSlot() {
		d := t.d
		t.eng.Release(&d)
		t.d.ForgetSlots()
	}
}

// decide decides ts in order and returns the index of the rule that
// refused the request, or -1 when every rule admitted it (or, in shadow
// mode, was counted and logged as refusing it). Rules that all count
// exactly in Redis are decided by one script, which spends on all or none
// (multi_cluster.go). Otherwise each rule spends its tokens as it admits;
// when rule k refuses, the tokens rules 1..k-1 took are given back
// (refund) before the refusal is answered, so a refused request spends
// nothing. Between a take and its refund a concurrent request may find
// those tokens taken: it may be refused (over-refusal), never admitted
// beyond a quota. The later rules are not consulted after a refusal. err:
// the client left while the request waited in an adaptive limit's queue.
func (p *pass) decide(r *http.Request, ts []taken, kb []byte) (refused int, err error) {
	if p.atomic {
		if refused, handled := decideAtomic(ts, kb); handled {
			return refused, nil
		}
	}
	for i := range ts {
		t := &ts[i]
		if t.skip {
			continue
		}
		if err := p.take(r, t, kb); err != nil {
			refund(ts[:i], kb)
			return -1, caddyhttp.Error(StatusClientClosed, err)
		}
		if t.d.OK() {
			t.admitted = true
			continue
		}
		if p.overLimit(r, t, kb) {
			continue
		}
		if rule := t.m.rule; rule.Shadow {
			t.m.lim.counters.shadow.Inc()
			p.shadowed = true
			p.h.logShadow(rule, t.key(kb), true, t.d.Reason.String())
			continue
		}
		refund(ts[:i], kb)
		return i, nil
	}
	return -1, nil
}

// take decides one rule: a slot of its adaptive limit first, if it has
// one (waiting in the limit's queue when it is full), then the rate and
// in-flight caps. A refusal of the rate gives the adaptive slot back.
func (p *pass) take(r *http.Request, t *taken, kb []byte) error {
	rule, lim := t.m.rule, t.m.lim
	t.decided = true
	if t.nest != nil {
		t.d = takeNested(t, kb)
		return nil
	}
	c := adaptiveOf(t.eng)
	if c == nil {
		t.d = decide(t.eng, rule, t.key(kb), lim.now(), t.cost)
		return nil
	}
	class := rule.priorityOf(r, p.repl)
	p.ph.class = uint8(class) + 1
	held, err := admitAdaptive(r.Context(), c, rule, class, t.key(kb), lim, p.repl)
	if t.d = held; err != nil || !held.OK() {
		return err
	}
	t.d = decide(t.eng, rule, t.key(kb), lim.now(), t.cost)
	if held.Adaptive != nil {
		if t.d.OK() {
			t.d.Adaptive, t.d.Ticket = held.Adaptive, held.Ticket
		} else {
			held.Adaptive.Release(held.Ticket, -1, false, lim.now())
		}
	}
	t.d.Class = held.Class
	return nil
}

// decide decides through the engine's concrete type. Neither engine keeps
// the key; called directly, the compiler sees that, so the key's buffer
// stays on the stack (through the interface it would be one allocation per
// request).
func decide(eng Engine, rule *Rule, key []byte, now, cost int64) Decision {
	switch e := eng.(type) {
	case *localEngine:
		return e.take(rule, key, now, cost)
	case *clusterEngine:
		return e.take(rule, key, now, cost)
	}
	return eng.Take(rule, bytes.Clone(key), now)
}

// refund gives back what the admitted rules of ts took and frees their
// in-flight slots: their request was refused by a later rule.
func refund(ts []taken, kb []byte) {
	for i := range ts {
		t := &ts[i]
		if !t.admitted {
			continue
		}
		if n := t.spent(); n > 0 && t.nest == nil { // a tree's spend stays (nested_decide.go)
			settle(t.eng, t.m.rule, t.key(kb), t.m.lim.now(), -n)
			t.d.Remaining += n // for the headers: what is left after the refund
		}
		t.release()
		t.admitted = false
	}
}
