package ratelimit

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/internal/handlerkit"
)

// A request's path through the handler is one pipeline, for one rule or
// several (a handler's single rule is a list of one), in named steps; any
// step may answer the request and end it:
//
//   - resolve: the rules in force and their limiters (this file)
//   - keys: each rule's key and cost; an empty key or a bad cost is
//     answered before anything is spent (this file)
//   - decide: each rule's decision in order, after a wait in an adaptive
//     limit's queue; a refusal gives back what the rules before it took
//     (pipeline_decide.go; several cluster rules by one script,
//     multi_cluster.go and ratelimit/cluster)
//   - report: placeholders and rate limit headers (pipeline_report.go)
//   - reject: a refusal's answer (reject.go)
//   - serve: wait for a paced slot, call the next handler and, in one
//     deferred place however the request ends, settle, give the adaptive
//     slot back and free the in-flight slots (pipeline_serve.go)

// pass is what the steps share of one request, besides its rules' parts
// and keys: those stay locals of ServeHTTP (ts, kb), passed to each step,
// so that they stay on the stack.
type pass struct {
	h        *Handler
	repl     *caddy.Replacer
	pub      handlerkit.Placeholders
	ph       placeholders
	policies string // the list's static RateLimit-Policy (ruleSet.policies)
	atomic   bool   // the list may be decided by one script (ruleSet.atomic)
	shadowed bool   // a shadow rule would have refused the request
}

// ServeHTTP decides the request: pass it on, or answer for the limiter.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	p := pass{h: h, repl: repl, pub: handlerkit.PlaceholdersOf(r, repl)}
	// The rules' parts and keys live on the stack for a short list.
	var tsBuf [4]taken
	var keyBuf [256]byte
	ts, err := h.resolve(tsBuf[:0], &p)
	if len(ts) == 0 {
		if err != nil {
			return err
		}
		handlerkit.EmptyPlaceholders(p.pub)
		return next.ServeHTTP(w, r)
	}
	p.ph.rule = ts[0].m.rule
	if span := p.pub.Span(r.Context()); span != nil {
		defer p.ph.trace(span)
	}
	kb, answered, err := p.keys(w, r, ts, keyBuf[:0])
	if answered {
		return err
	}
	refused, err := p.decide(r, ts, kb)
	if err != nil {
		return err
	}
	record(ts, kb)
	p.report(w.Header(), ts, kb, refused)
	if refused >= 0 {
		t := &ts[refused]
		return h.reject(w, t.m.rule, t.m.lim, &t.d, &p)
	}
	p.admit(ts)
	return serve(w, r, next, ts, kb, repl)
}

// resolve appends the rules in force for this request to ts, in order.
// With none it returns ts empty: the request then passes, unless err
// (a missing rule under on_missing_rule refuse, or a list that cannot be
// decided as several limits) answers it.
func (h *Handler) resolve(ts []taken, p *pass) ([]taken, error) {
	switch {
	case h.inline != nil:
		return append(ts, taken{m: member{rule: h.inline, lim: h.fixed}}), nil
	case h.list == nil:
		rule, lim, _ := h.sel.Current()
		if rule == nil {
			return ts, h.sel.Refusal("ratelimit")
		}
		return append(ts, taken{m: member{rule: rule, lim: lim}}), nil
	}
	set := h.list.current()
	if set.missing != "" && h.list.refuse {
		return ts, handlerkit.RefuseMissing("ratelimit", set.missingKind, set.missing)
	}
	if len(set.members) == 0 {
		return ts, h.sel.Refusal("ratelimit")
	}
	if len(set.members) > 1 && set.unsupported != "" {
		return ts, caddyhttp.Error(http.StatusInternalServerError, errors.New("ratelimit: "+set.unsupported))
	}
	if len(set.members) > cap(ts) {
		ts = make([]taken, 0, len(set.members))
	}
	for _, m := range set.members {
		ts = append(ts, taken{m: m})
	}
	p.policies, p.atomic = set.policies, set.atomic
	return ts, nil
}

// keys finds every rule's key (appended to kb) and cost before any rule
// decides: a request refused for one of them spends nothing, and a list
// decided by one script has them all. A rule without a key refuses the
// request (answered), or, in shadow mode, is counted, logged and left out
// of the decision; so does a bad cost.
func (p *pass) keys(w http.ResponseWriter, r *http.Request, ts []taken, kb []byte) (_ []byte, answered bool, err error) {
	for i := range ts {
		t := &ts[i]
		rule, lim := t.m.rule, t.m.lim
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
				p.shadowed = true
				// A single rule's line has always named no key, a list's an empty one.
				p.h.logShadow(rule, nil, len(ts) > 1, "empty_key")
				t.skip = true
				continue
			}
			p.ph.rule = rule
			return kb, true, p.h.denyEmptyKey(w, rule, lim, p)
		}
		kb = key
		t.kfrom, t.kto = from, len(kb)
		t.cost = rule.Cost
		if rule.costExpr.expr != "" {
			if t.cost, ok = rule.costExpr.eval(r, p.repl, rule.MaxCost); !ok {
				p.ph.rule = rule
				p.ph.setKey(t.key(kb))
				return kb, true, p.h.badCost(w, rule, lim, p.pub, &p.ph)
			}
		}
		t.eng = lim.engine(rule)
		if rule.Nest.Parent != "" {
			if kb, answered, err = p.nestKeys(w, r, t, kb); answered {
				return kb, true, err
			}
		}
	}
	return kb, false, nil
}

// logShadow logs what a shadow rule would have refused: with its key
// (shown as its rule shows keys; nil: an empty one) when keyed. The key is
// formatted only when the line is written.
func (h *Handler) logShadow(rule *Rule, key []byte, keyed bool, reason string) {
	c := h.logger.Check(zap.InfoLevel, "shadow rule would reject")
	switch {
	case c == nil:
	case !keyed:
		c.Write(zap.String("rule", rule.ID), zap.String("reason", reason))
	case key == nil:
		c.Write(zap.String("rule", rule.ID), zap.String("key", ""), zap.String("reason", reason))
	default:
		c.Write(zap.String("rule", rule.ID), zap.String("key", rule.shownKey(string(key))), zap.String("reason", reason))
	}
}
