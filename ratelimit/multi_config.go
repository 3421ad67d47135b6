package ratelimit

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// listTokens are the Caddyfile lines of Rules and Inlines, for errors.
type listTokens struct {
	rules  []caddyfile.Token // parallel to Rules
	scopes []caddyfile.Token // each inline's scope line (or its limit line)
}

// singleList turns a list of one rule into the single-rule form (rule or
// inline), which takes the one-rule path.
func (h *Handler) singleList() {
	if h.Rule != "" || h.Route != "" || rulestore.SpecFields(h.Inline) != nil {
		return
	}
	switch {
	case len(h.Rules) == 1 && len(h.Inlines) == 0 && !h.Rules[0].HasInline():
		h.Rule, h.Rules = h.Rules[0].ID, nil
		if len(h.listToks.rules) == 1 {
			h.ruleTok = h.listToks.rules[0]
		}
	case len(h.Rules) == 1 && len(h.Inlines) == 0:
		s := *h.Rules[0].Inline
		s.ID, h.Inline, h.Rules = h.Rules[0].ID, &s, nil
	case len(h.Rules) == 0 && len(h.Inlines) == 1:
		h.Inline, h.Inlines = h.Inlines[0], nil
		if len(h.listToks.scopes) == 1 {
			h.scopeTok = h.listToks.scopes[0]
		}
	}
}

// provisionList prepares the rules of Rules and Inlines (list, as
// provisioned): a cluster rule needs Redis and none may shape traffic
// (multiFits).
func (h *Handler) provisionList(list []handlerkit.Choice) error {
	fixed := make([]handlerkit.Entry[*Rule, *limiter], 0, len(list))
	for _, c := range list {
		if c.Rule == nil {
			if err := h.needsRedis(c.ID); err != nil {
				return err
			}
			if rr := h.app.Lookup(rulestore.RateLimit, c.ID); rr != nil {
				if err := multiFits(rr.Value.(*Rule)); err != nil {
					return fmt.Errorf("ratelimit: %w", err)
				}
			}
			fixed = append(fixed, handlerkit.Entry[*Rule, *limiter]{ID: c.ID,
				Handle: h.app.UseHandle(rulestore.RateLimit, c.ID), State: h.limFor(c.ID)})
			continue
		}
		r := c.Rule.(*Rule)
		if r.Cluster() && h.app.Client() == nil {
			return fmt.Errorf("inline rate_limit rule %q: %s", c.ID, errClusterNeedsRedis)
		}
		if err := multiFits(r); err != nil {
			return fmt.Errorf("ratelimit: %w", err)
		}
		lim := h.holder.Get(c.ID)
		r = lim.intern(r, c.Digest)
		lim.setBackend(h.app, h.logger)
		fixed = append(fixed, handlerkit.Entry[*Rule, *limiter]{ID: c.ID, Inline: r, State: lim})
	}
	if len(fixed) > 1 {
		for _, e := range fixed {
			e.State.listed.Store(true)
		}
	}
	h.list = h.newRuleList(fixed)
	return nil
}

// limFor is the limiter of rule id, with its backend.
func (h *Handler) limFor(id string) *limiter {
	lim := h.holder.Get(id)
	lim.setBackend(h.app, h.logger)
	return lim
}

// newRuleList makes the rule list of Rules/Inlines (fixed) or of Route.
func (h *Handler) newRuleList(fixed []handlerkit.Entry[*Rule, *limiter]) *ruleList {
	return &ruleList{app: h.app, refuse: h.OnMissingRule == handlerkit.MissingRefuse,
		RuleList: handlerkit.NewRuleList(h.app, rulestore.RateLimit, fixed, h.Route,
			func(b *rulestore.RouteBinding) []string { return b.RateLimits }, h.limFor, setOf)}
}
