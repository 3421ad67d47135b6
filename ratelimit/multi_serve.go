package ratelimit

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/ratelimit/engine"
)

// taken is one rule's part in a request decided by several rules.
type taken struct {
	m        member
	eng      Engine
	kfrom    int // the rule's key is kb[kfrom:kto] of its request's key
	kto      int // buffer (a slice kept here would move the buffer to the heap)
	cost     int64
	d        Decision
	decided  bool // d holds the rule's decision
	skip     bool // a shadow rule without a key: not decided
	admitted bool // the rule admitted it: its tokens are spent
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

// serveMulti decides a request by several rules, in order: it passes only
// when every rule admits it. Rules that all count exactly in Redis are
// decided by one script, which spends on all or none (multi_cluster.go).
// Otherwise each rule spends its tokens as it admits; when rule k refuses,
// the tokens rules 1..k-1 took are given back (refund) before the refusal
// is answered, so a refused request spends nothing. Between a take and its
// refund a concurrent request may find those tokens taken: it may be
// refused (over-refusal), never admitted beyond a quota. The later rules
// are not consulted after a refusal.
//
// A shadow rule that would refuse is counted and logged, and the others
// decide. A rule that shapes traffic (pacing, warm-up, adaptive) cannot be
// one of several (multiFits).
func (h *Handler) serveMulti(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, set *ruleSet, repl *caddy.Replacer, pub handlerkit.Placeholders) error {
	if set.unsupported != "" {
		return caddyhttp.Error(http.StatusInternalServerError, errors.New("ratelimit: "+set.unsupported))
	}
	// The rules' parts and keys live on the stack for a short list.
	var tsBuf [4]taken
	var keyBuf [256]byte
	ts := tsBuf[:0]
	if len(set.members) > len(tsBuf) {
		ts = make([]taken, 0, len(set.members))
	}
	for _, m := range set.members {
		ts = append(ts, taken{m: m})
	}
	kb := keyBuf[:0]
	ph := &placeholders{rule: set.members[0].rule}
	if span := pub.Span(r.Context()); span != nil {
		defer func() { ph.trace(span) }()
	}
	shadowed := false
	// Every rule's key and cost first: a request refused for one of them
	// spends nothing, and a list decided by one script has them all.
	for i, m := range set.members {
		t := &ts[i]
		rule, lim := m.rule, m.lim
		from := len(kb)
		key, ok := rule.Key.Append(kb, r)
		if !ok {
			switch {
			case rule.EmptyKeyStatus != 0:
			case rule.emptyLiteral != "":
				key, ok = append(key[:from], rule.emptyLiteral...), true
			default:
				key, ok = rule.EmptyKey.Append(key[:from], r)
			}
		}
		if !ok {
			if rule.Shadow {
				lim.counters.shadow.Inc()
				shadowed = true
				h.logShadow(rule, "", "empty_key")
				t.skip = true
				continue
			}
			*ph = placeholders{rule: rule}
			return h.denyEmptyKey(w, r, next, rule, lim, repl, pub, ph)
		}
		kb = key
		key = key[from:len(key):len(key)]
		t.kfrom, t.kto = from, len(kb)
		cost := rule.Cost
		if rule.costExpr.expr != "" {
			if cost, ok = rule.costExpr.eval(r, repl, rule.MaxCost); !ok {
				*ph = placeholders{rule: rule}
				ph.setKey(key)
				return h.badCost(w, rule, lim, pub, ph)
			}
		}
		t.cost = cost
		t.eng = lim.engine(rule)
	}
	refused, atomic := -1, false
	if set.atomic {
		refused, atomic = decideAtomic(ts, kb)
	}
	for i := range ts {
		t := &ts[i]
		if atomic {
			break // decided by the script
		}
		if t.skip {
			continue
		}
		rule, lim := t.m.rule, t.m.lim
		t.d = decide(t.eng, rule, t.key(kb), lim.now(), t.cost)
		t.decided = true
		if t.d.OK() {
			t.admitted = true
			continue
		}
		if rule.Shadow {
			lim.counters.shadow.Inc()
			shadowed = true
			h.logShadow(rule, rule.shownKey(string(t.key(kb))), t.d.Reason.String())
			continue
		}
		refund(ts[:i], kb)
		refused = i
		break
	}
	if refused >= 0 {
		t := &ts[refused]
		*ph = placeholders{rule: t.m.rule}
		ph.setKey(t.key(kb))
		if quotaKnown(&t.d) {
			ph.limits, ph.remaining = t.d.Limits, t.d.Remaining
			if t.m.rule.Headers {
				setMultiHeaders(w.Header(), ts, refused, set.policies)
			}
		} else if k := mostRestrictive(ts[:refused], true); k >= 0 {
			// Refused without a quota (an in-flight cap): the headers
			// are the quotas the rules before it hold, refunded.
			setMultiHeaders(w.Header(), ts, k, set.policies)
		}
		return h.reject(w, t.m.rule, t.m.lim, &t.d, repl, pub, ph)
	}
	for i := range ts {
		if ts[i].admitted {
			ts[i].m.lim.counters.allowed.Inc()
		}
	}
	ph.result = resultAllowed
	if shadowed {
		ph.result = resultShadowRejected
	}
	if k := mostRestrictive(ts, false); k >= 0 {
		t := &ts[k]
		ph.rule, ph.limits, ph.remaining = t.m.rule, t.d.Limits, t.d.Remaining
		ph.setKey(t.key(kb))
	}
	if k := mostRestrictive(ts, true); k >= 0 {
		setMultiHeaders(w.Header(), ts, k, set.policies)
	}
	ph.publish(pub)
	return serveAdmitted(w, r, next, ts, kb)
}

// refund gives back what the admitted rules of ts took and frees their
// in-flight slots: their request was refused by a later rule.
func refund(ts []taken, kb []byte) {
	for i := range ts {
		t := &ts[i]
		if !t.admitted {
			continue
		}
		if n := t.spent(); n > 0 {
			settle(t.eng, t.m.rule, t.key(kb), t.m.lim.now(), -n)
			t.d.Remaining += n // for the headers: what is left after the refund
		}
		t.release()
		t.admitted = false
	}
}

// serveAdmitted serves a request every rule admitted: it holds each rule's
// in-flight slots until the request ends and settles each settling rule
// (count_status, response_cost) by the response through a settle writer of
// its own, however the request ends, as a single rule does (settle.go).
func serveAdmitted(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, ts []taken, kb []byte) (err error) {
	var settling []*settleWriter
	returned := false
	defer func() {
		for i := len(settling) - 1; i >= 0; i-- { // each wraps the one before: innermost first
			settling[i].done(err, returned)
		}
		for i := range ts {
			if ts[i].admitted {
				ts[i].release()
			}
		}
	}()
	wr := w
	for i := range ts {
		t := &ts[i]
		if !t.admitted || !t.m.rule.Settles {
			continue
		}
		sw := newSettleWriter(wr, r, t.m.rule, t.m.lim, t.eng, t.key(kb), t.cost, engine.RefOf(&t.d))
		settling = append(settling, sw)
		wr = sw
	}
	err = next.ServeHTTP(wr, r)
	returned = true
	return err
}

// quotaKnown reports whether d carries quota information for headers: not
// an in-flight refusal (the quota was not consulted) nor a decision made
// without Redis.
func quotaKnown(d *Decision) bool {
	return !d.Unknown && d.Reason != TooManyInFlight && d.Reason != TooManyInFlightTotal
}

func (h *Handler) logShadow(rule *Rule, key, reason string) {
	if c := h.logger.Check(zap.InfoLevel, "shadow rule would reject"); c != nil {
		c.Write(zap.String("rule", rule.ID), zap.String("key", key), zap.String("reason", reason))
	}
}
