package ratelimit

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// ParseCaddyfile parses the ratelimit directive:
//
//	ratelimit [<matcher>] <rule-id> [<rule-id> ...]
//	ratelimit [<matcher>] {
//		rule <id> | route <name> | <rule field> <value...> ...
//	}
//	ratelimit [<matcher>] {
//		rule <id> [<id> ...]
//		limit [<id>] { <rule field> <value...> ... }
//		...
//	}
//
// Several rule ids and limit blocks are several limits: a request passes
// only when every one admits it (multi.go).
func ParseCaddyfile(hp httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h := new(Handler)
	if err := handlerkit.UnmarshalDirective(hp, "ratelimit", h, &h.adapted); err != nil {
		return nil, err
	}
	return h, h.checkClusterHasRedis(hp)
}

// checkClusterHasRedis fails a cluster rule in a Caddyfile whose rulestore
// has no redis, pointing at the line (Provision checks JSON configs too).
func (h *Handler) checkClusterHasRedis(hp httpcaddyfile.Helper) error {
	declared := rulestore.DeclaredIn(hp)
	if declared.HasRedis() {
		return nil
	}
	cluster := func(f rulestore.Fields) bool { return strings.EqualFold(strings.TrimSpace(f["scope"]), "cluster") }
	if h.Inline != nil && cluster(rulestore.SpecFields(h.Inline)) {
		return rulestore.ErrAt(h.scopeTok, "ratelimit: %s", errClusterNeedsRedis)
	}
	if h.Rule != "" && cluster(declared.Fields(rulestore.RateLimit, h.Rule)) {
		return rulestore.ErrAt(h.ruleTok, "ratelimit rule %s: %s", h.Rule, errClusterNeedsRedis)
	}
	for i, s := range h.Inlines {
		if cluster(rulestore.SpecFields(s)) {
			return rulestore.ErrAt(h.listToks.scopes[i], "ratelimit: %s", errClusterNeedsRedis)
		}
	}
	for i, ref := range h.Rules {
		if cluster(declared.Fields(rulestore.RateLimit, ref.ID)) {
			return rulestore.ErrAt(h.listToks.rules[i], "ratelimit rule %s: %s", ref.ID, errClusterNeedsRedis)
		}
	}
	return nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	p, err := handlerkit.Directive{Name: "ratelimit", Kind: rulestore.RateLimit, List: "limit"}.ParseCaddyfile(d)
	if err != nil {
		return err
	}
	h.adapted.Take(p)
	h.ruleTok, h.scopeTok = p.RuleTok, p.Lines["scope"]
	sel, err := handlerkit.ToSelection[*rulestore.RateLimitSpec](p)
	if err != nil {
		return err
	}
	h.Rule, h.Route, h.Inline, h.OnMissingRule = sel.Rule, sel.Route, sel.Inline, sel.OnMissingRule
	h.Rules, h.Inlines, h.listToks.rules = sel.Rules, sel.Inlines, p.RuleToks
	for _, b := range p.Inlines {
		tok, ok := b.Lines["scope"]
		if !ok {
			tok = b.Start
		}
		h.listToks.scopes = append(h.listToks.scopes, tok)
	}
	return nil
}
