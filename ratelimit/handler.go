package ratelimit

import (
	"errors"
	"fmt"

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
	if err := h.checkNested(); err != nil {
		return err
	}
	app.SetPreviewer(rulestore.RateLimit, previewer{})
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

var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
