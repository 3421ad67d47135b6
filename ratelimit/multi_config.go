package ratelimit

import (
	"errors"
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
	if h.Rule != "" || h.Route != "" || h.source().HasInline() {
		return
	}
	switch {
	case len(h.Rules) == 1 && len(h.Inlines) == 0:
		h.Rule, h.Rules = h.Rules[0], nil
		if len(h.listToks.rules) == 1 {
			h.ruleTok = h.listToks.rules[0]
		}
	case len(h.Rules) == 0 && len(h.Inlines) == 1:
		h.Inline, h.Inlines = h.Inlines[0], nil
		if len(h.listToks.scopes) == 1 {
			h.scopeTok = h.listToks.scopes[0]
		}
	}
}

// inlineSource is inline rule s as a RuleSource, for its id and parsing.
func inlineSource(s *rulestore.RateLimitSpec) *handlerkit.RuleSource[*rulestore.RateLimitSpec] {
	return handlerkit.NewRuleSource("", "", s, "")
}

// validateList checks Rules and Inlines: well-formed ids, each rule listed
// once, nothing mixed with rule, route or inline.
func (h *Handler) validateList() error {
	if h.Rule != "" || h.Route != "" || h.source().HasInline() {
		return errors.New("ratelimit: rules and inlines cannot be mixed with rule, route or inline")
	}
	if err := h.source().OnMissing.Validate("ratelimit"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, id := range h.Rules {
		if err := rulestore.ValidID(id); err != nil {
			return fmt.Errorf("ratelimit: rules: %w", err)
		}
		if seen[id] {
			return fmt.Errorf("ratelimit: rate_limit rule %q listed twice", id)
		}
		seen[id] = true
	}
	for i, s := range h.Inlines {
		b := inlineSource(s)
		if !b.HasInline() {
			return fmt.Errorf("ratelimit: inlines[%d] has no fields", i)
		}
		if err := b.Validate("ratelimit"); err != nil {
			return err
		}
		id, _ := b.InlineRule()
		if seen[id] {
			return fmt.Errorf("ratelimit: rate_limit rule %q listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

// provisionList prepares Rules and Inlines: each named rule must exist (or
// can come from Redis), each inline rule parse; a cluster rule needs Redis
// and none may shape traffic (multiFits).
func (h *Handler) provisionList() error {
	fixed := make([]listed, 0, len(h.Rules)+len(h.Inlines))
	for _, id := range h.Rules {
		if err := h.app.Require(rulestore.RateLimit, id); err != nil {
			return fmt.Errorf("ratelimit: %w", err)
		}
		if err := h.needsRedis(id); err != nil {
			return err
		}
		if rr := h.app.Lookup(rulestore.RateLimit, id); rr != nil {
			if err := multiFits(rr.Value.(*Rule)); err != nil {
				return fmt.Errorf("ratelimit: %w", err)
			}
		}
		lim := h.holder.Get(id)
		lim.setBackend(h.app, h.logger)
		fixed = append(fixed, listed{id: id, h: h.app.UseHandle(rulestore.RateLimit, id), lim: lim})
	}
	for _, s := range h.Inlines {
		b := inlineSource(s)
		id, err := b.StateID(h.app, rulestore.RateLimit, "ratelimit")
		if err != nil {
			return err
		}
		v, err := b.ParseInline(h.app, rulestore.RateLimit, "ratelimit", id)
		if err != nil {
			return err
		}
		r := v.(*Rule)
		if r.Cluster() && h.app.Client() == nil {
			return fmt.Errorf("inline rate_limit rule %q: %s", id, errClusterNeedsRedis)
		}
		if err := multiFits(r); err != nil {
			return fmt.Errorf("ratelimit: %w", err)
		}
		_, f := b.InlineRule()
		lim := h.holder.Get(id)
		r = lim.intern(r, f.Digest())
		lim.setBackend(h.app, h.logger)
		fixed = append(fixed, listed{id: id, lim: lim, inline: r})
	}
	if len(fixed) > 1 {
		for _, e := range fixed {
			e.lim.listed.Store(true)
		}
	}
	h.list = h.newRuleList(fixed)
	return nil
}

// newRuleList makes the rule list of Rules/Inlines (fixed) or of Route.
func (h *Handler) newRuleList(fixed []listed) *ruleList {
	l := &ruleList{app: h.app, refuse: h.source().Refuse(), fixed: fixed, route: h.Route,
		limFor: func(id string) *limiter {
			lim := h.holder.Get(id)
			lim.setBackend(h.app, h.logger)
			return lim
		}}
	if h.Route != "" {
		l.routeH = h.app.UseHandle(rulestore.Binding, h.Route)
	}
	return l
}
