package ratelimit

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// Handler limits requests by a rate_limit rule: exactly one of rule, route
// and inline says which, or by several rules (rules and inlines, or a
// route binding listing several), all of which must admit a request
// (multi.go). Each inline block is its own rule with its own quota;
// blocks giving the same id share one.
type Handler struct {
	// Rule is the id of the rate_limit rule, in the rule store, that this
	// handler applies.
	Rule string `json:"rule,omitempty"`
	// Route names a route binding of the rule store; its rate_limit field
	// names the rule (or several), followed live as it changes.
	Route string `json:"route,omitempty"`
	// Inline declares the rule in place, with the rule store's field
	// names. Its optional "id" names it (labels, error bodies,
	// RateLimit-Policy, the quota's state); handlers giving the same id
	// share one quota. Without one its id is inline:<hash of the fields>;
	// the Caddyfile adapter writes inline:<hash>-2, -3... into later
	// identical blocks, and in JSON two identical blocks without an id
	// are an error.
	Inline *rulestore.RateLimitSpec `json:"inline,omitempty"`
	// OnMissingRule is pass (the default: while a named rule or route
	// binding does not exist, requests go on unchecked and it is warned
	// about) or refuse (503 Service Unavailable until it exists).
	OnMissingRule string `json:"on_missing_rule,omitempty"`
	// Rules are several rules: a request passes only when every one
	// admits it, decided in order, Rules before Inlines. Each is the id of
	// a rule of the rule store ("per_second"), or an inline rule with its
	// id ({"id": "search", "inline": {...}}). Not with rule, route or
	// inline.
	Rules []handlerkit.RuleRef[*rulestore.RateLimitSpec] `json:"rules,omitempty"`
	// Inlines are several rules declared in place, each like Inline,
	// decided after Rules. Not with rule, route or inline.
	Inlines []*rulestore.RateLimitSpec `json:"inlines,omitempty"`

	app    *rulestore.App
	holder *handlerkit.Holder[*limiter]
	fixed  *limiter // for an inline rule
	inline *Rule
	sel    *handlerkit.Selector[*Rule, *limiter] // for Rule
	list   *ruleList                             // for Route, Rules and Inlines
	logger *zap.Logger

	ruleTok, scopeTok caddyfile.Token    // for errors pointing at the line
	listToks          listTokens         // the same for Rules and Inlines
	adapted           handlerkit.Adapted // while the Caddyfile is adapted
}

// limiters holds every rule id's state across config generations.
var limiters = handlerkit.NewShared[*limiter]()

func init() {
	caddy.RegisterModule(new(Handler))
}

// CaddyModule returns the Caddy module information.
func (*Handler) CaddyModule() caddy.ModuleInfo {
	return handlerkit.ModuleInfo[Handler]("http.handlers.ratelimit")
}

// Provision loads the rule store and this handler's limiter.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.singleList()
	if err := h.Validate(); err != nil {
		return err
	}
	app, err := rulestore.Get(ctx)
	if err != nil {
		return err
	}
	h.app = app
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	h.holder = limiters.Holder(func(id string) *limiter { return newLimiter(id, nil) })
	chosen, err := h.selection().Provision(app, rulestore.RateLimit, "ratelimit",
		func(b *rulestore.RouteBinding) []string { return b.RateLimits })
	if err != nil {
		return err
	}
	switch {
	case chosen.List != nil:
		return h.provisionList(chosen.List)
	case h.Rule != "":
		if err := h.needsRedis(h.Rule); err != nil {
			return err
		}
		h.sel = handlerkit.NewSelector[*Rule](app, rulestore.RateLimit, h.selection(),
			func(b *rulestore.RouteBinding) string { return b.RateLimit }, h.limFor)
	case h.Route != "":
		if b := app.Route(h.Route); b != nil {
			for _, id := range b.RateLimits {
				if err := h.needsRedis(id); err != nil {
					return fmt.Errorf("route %s: %w", h.Route, err)
				}
			}
		}
		h.list = h.newRuleList(nil)
	default:
		c := chosen.Inline
		r := c.Rule.(*Rule)
		if r.Cluster() && app.Client() == nil {
			return errors.New("inline rate_limit rule: " + errClusterNeedsRedis)
		}
		h.fixed = h.holder.Get(c.ID)
		h.inline = h.fixed.intern(r, c.Digest)
		h.fixed.setBackend(app, h.logger)
	}
	return nil
}

const errClusterNeedsRedis = "field scope: cluster keeps the quota in Redis: configure redis in the global rulestore block (or use scope local)"

// needsRedis fails for a static cluster rule in a config without Redis. A
// rule that can come from Redis always has a Redis to count in.
func (h *Handler) needsRedis(id string) error {
	if h.app.Client() != nil {
		return nil
	}
	if rr := h.app.Lookup(rulestore.RateLimit, id); rr != nil && rr.Value.(*Rule).Cluster() {
		return fmt.Errorf("rate_limit rule %q: %s", id, errClusterNeedsRedis)
	}
	return nil
}

// Validate checks that exactly one rule source, or a list of rules, is
// given.
func (h *Handler) Validate() error { return h.selection().Validate("ratelimit", rulestore.RateLimit) }

// selection hands the handler's rule fields to the rule selection the
// handlers share.
func (h *Handler) selection() *handlerkit.Selection[*rulestore.RateLimitSpec] {
	return &handlerkit.Selection[*rulestore.RateLimitSpec]{Rule: h.Rule, Route: h.Route, Inline: h.Inline,
		Rules: h.Rules, Inlines: h.Inlines, OnMissing: handlerkit.OnMissing{OnMissingRule: h.OnMissingRule}}
}

// Cleanup drops this handler's hold on the shared limiters.
func (h *Handler) Cleanup() error {
	if h.holder != nil {
		h.holder.Release()
	}
	return nil
}

// current returns the rule in force for this handler and its limiter, or
// nil when there is none (the request then passes); of several rules, the
// first.
func (h *Handler) current() (*Rule, *limiter) {
	if h.inline != nil {
		return h.inline, h.fixed
	}
	if h.list != nil {
		if s := h.list.current(); len(s.members) > 0 {
			return s.members[0].rule, s.members[0].lim
		}
		return nil, nil
	}
	r, lim, _ := h.sel.Current()
	return r, lim
}

// ServeHTTP decides the request: pass it on, or answer for the limiter.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	pub := handlerkit.PlaceholdersOf(r, repl)
	var rule *Rule
	var lim *limiter
	switch {
	case h.inline != nil:
		rule, lim = h.inline, h.fixed
	case h.list == nil:
		rule, lim, _ = h.sel.Current()
	default:
		set := h.list.current()
		if set.missing != "" && h.list.refuse {
			return handlerkit.RefuseMissing("ratelimit", set.missingKind, set.missing)
		}
		if len(set.members) > 1 {
			return h.serveMulti(w, r, next, set, repl, pub)
		}
		if len(set.members) == 1 {
			rule, lim = set.members[0].rule, set.members[0].lim
		}
	}
	if rule == nil {
		if err := h.sel.Refusal("ratelimit"); err != nil {
			return err
		}
		handlerkit.EmptyPlaceholders(pub)
		return next.ServeHTTP(w, r)
	}
	ph := placeholders{rule: rule}
	if span := pub.Span(r.Context()); span != nil {
		defer ph.trace(span)
	}
	var buf [160]byte
	key, ok := rule.Key.Append(buf[:0], r)
	if !ok {
		switch {
		case rule.EmptyKeyStatus != 0:
			return h.denyEmptyKey(w, r, next, rule, lim, repl, pub, &ph)
		case rule.emptyLiteral != "":
			key = append(key[:0], rule.emptyLiteral...)
		default:
			if key, ok = rule.EmptyKey.Append(key[:0], r); !ok {
				return h.denyEmptyKey(w, r, next, rule, lim, repl, pub, &ph)
			}
		}
	}
	cost := rule.Cost
	if rule.costExpr.expr != "" {
		if cost, ok = rule.costExpr.eval(r, repl, rule.MaxCost); !ok {
			ph.setKey(key)
			return h.badCost(w, rule, lim, pub, &ph)
		}
	}
	eng := lim.engine(rule)
	var d Decision
	if c := adaptiveOf(eng); c != nil {
		class := rule.priorityOf(r, repl)
		ph.class = uint8(class) + 1
		var err error
		if d, err = admitAdaptive(r.Context(), c, rule, class, key, lim, repl); err != nil {
			return caddyhttp.Error(StatusClientClosed, err)
		}
	}
	if d.OK() {
		held := d
		d = decide(eng, rule, key, lim.now(), cost)
		if held.Adaptive != nil {
			if d.OK() {
				d.Adaptive, d.Ticket = held.Adaptive, held.Ticket
			} else {
				held.Adaptive.Release(held.Ticket, -1, false, lim.now())
			}
		}
		d.Class = held.Class
	}
	ph.setKey(key)
	// An in-flight cap refuses before the rate quota is consulted: the
	// quota is untouched and unknown here, so no quota headers claim r=0.
	quota := d.Reason != TooManyInFlight && d.Reason != TooManyInFlightTotal
	if quota {
		ph.limits, ph.remaining = d.Limits, d.Remaining
	}
	if rule.Headers && !d.Unknown && quota {
		setHeaders(w.Header(), rule, &d)
	}
	if !d.OK() {
		if !rule.Shadow {
			return h.reject(w, rule, lim, &d, repl, pub, &ph)
		}
		lim.counters.shadow.Inc()
		ph.result = resultShadowRejected
		ph.publish(pub)
		if c := h.logger.Check(zap.InfoLevel, "shadow rule would reject"); c != nil {
			c.Write(zap.String("rule", rule.ID), zap.String("key", rule.shownKey(string(key))), zap.String("reason", d.Reason.String()))
		}
		return next.ServeHTTP(w, r)
	}
	lim.counters.allowed.Inc()
	ph.result = resultAllowed
	if d.Wait > 0 || d.Adaptive != nil {
		ph.publish(pub)
		return serveShaped(w, r, next, rule, lim, eng, d, repl)
	}
	ph.paces = rule.Flow.Behavior.Paces()
	ph.publish(pub)
	if rule.Settles {
		return serveSettled(w, r, next, rule, lim, eng, key, cost, &d)
	}
	if d.HoldsSlot() {
		return serveHolding(w, r, next, eng, d)
	}
	return next.ServeHTTP(w, r)
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

// serveHolding serves a request that holds an in-flight slot and frees the
// slot however the request ends: response done, error, panic or client gone
// (the proxy returns when the request's context is cancelled).
func serveHolding(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, eng Engine, d Decision) error {
	defer eng.Release(&d)
	return next.ServeHTTP(w, r)
}

// ceilSeconds rounds a wait in ns up to whole seconds.
func ceilSeconds(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns + 1e9 - 1) / 1e9
}

func (h *Handler) reject(w http.ResponseWriter, rule *Rule, lim *limiter, d *Decision, repl *caddy.Replacer, pub handlerkit.Placeholders, ph *placeholders) error {
	status, res := rule.Status, resultRateLimited
	retry := ceilSeconds(d.RetryAfter)
	switch d.Reason {
	case RateLimited:
		lim.counters.rejected.Inc()
	case RedisUnavailable:
		status, res = rule.RedisErrorStatus, resultRedisUnavailable
		retry = 1 // the health probe runs every 250ms
		lim.counters.unavailable.Inc()
	default:
		status, res = rule.ConcurrencyStatus, resultTooManyInFlight
		retry = 1 // a slot frees when a request ends; a short hint
		lim.counters.concurrency.Inc()
	}
	if retry < 1 {
		retry = 1
	}
	name := resultNames[res]
	w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	if d.Reason == OverAdaptiveLimit {
		w.Header().Set(PriorityHeader, d.Class.String())
	}
	ph.result, ph.retry = res, uint32(min(retry, math.MaxUint32))
	ph.publish(pub)
	if rule.HandleErrors {
		return caddyhttp.Error(status, fmt.Errorf("%s by rule %s", name, rule.ID))
	}
	body := `{"error":"` + name + `","rule":"` + rule.ID + `","retry_after":` + strconv.FormatInt(retry, 10) + "}"
	if rule.Body != "" {
		body = rule.Body
		if repl != nil {
			body = repl.ReplaceKnown(body, "")
		}
	}
	writeBody(w, status, body)
	return nil
}

// denyEmptyKey refuses a request whose key is empty (in shadow mode it
// only counts and logs it).
func (h *Handler) denyEmptyKey(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, rule *Rule, lim *limiter, repl *caddy.Replacer, pub handlerkit.Placeholders, ph *placeholders) error {
	if rule.Shadow {
		lim.counters.shadow.Inc()
		ph.result = resultShadowRejected
		ph.publish(pub)
		if c := h.logger.Check(zap.InfoLevel, "shadow rule would reject"); c != nil {
			c.Write(zap.String("rule", rule.ID), zap.String("reason", "empty_key"))
		}
		return next.ServeHTTP(w, r)
	}
	lim.counters.emptyKey.Inc()
	status := rule.EmptyKeyStatus
	if status == 0 {
		status = http.StatusForbidden
	}
	ph.result = resultEmptyKey
	ph.publish(pub)
	if rule.HandleErrors {
		return caddyhttp.Error(status, fmt.Errorf("empty rate limit key for rule %s", rule.ID))
	}
	writeBody(w, status, `{"error":"empty_key","rule":"`+rule.ID+`"}`)
	return nil
}

// writeBody answers with a JSON content type when the body looks like JSON.
func writeBody(w http.ResponseWriter, status int, body string) {
	ct := "text/plain; charset=utf-8"
	for i := 0; i < len(body); i++ {
		if c := body[i]; c != ' ' && c != '\n' && c != '\t' && c != '\r' {
			if c == '{' || c == '[' {
				ct = "application/json"
			}
			break
		}
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
