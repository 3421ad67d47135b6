package grayroute

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// ParseCaddyfile parses the grayroute directive:
//
//	grayroute [<matcher>] [<rule-id> ...] [{
//		rule            <id> [<id> ...]
//		route           <name>
//		gray            <id> { <field> <value> ... }
//		default_version <version>
//		header          <name>|off
//	}]
func ParseCaddyfile(hp httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h := new(Handler)
	if err := handlerkit.UnmarshalDirective(hp, "grayroute", h, &h.refs); err != nil {
		return nil, err
	}
	return h, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	addRule := func(ref RuleRef) error {
		if err := rulestore.ValidID(ref.ID); err != nil {
			return d.Errf("grayroute: %v", err)
		}
		for _, r := range h.Rules {
			if r.ID == ref.ID {
				return d.Errf("grayroute: gray rule %q listed twice", ref.ID)
			}
		}
		h.Rules = append(h.Rules, ref)
		return nil
	}
	ref := func(k rulestore.Kind, id string) {
		h.refs = append(h.refs, rulestore.CaddyfileRef{Tok: d.Token(), Kind: k, ID: id})
	}
	for d.NextArg() {
		if err := addRule(RuleRef{ID: d.Val()}); err != nil {
			return err
		}
		ref(rulestore.Gray, d.Val())
	}
	for d.NextBlock(0) {
		switch opt := d.Val(); opt {
		case "rule":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Errf("grayroute: rule needs one or more rule ids")
			}
			for _, id := range args {
				if err := addRule(RuleRef{ID: id}); err != nil {
					return err
				}
				ref(rulestore.Gray, id)
			}
		case "gray":
			if !d.NextArg() {
				return d.Errf("grayroute: gray needs a rule id and a { field value ... } block")
			}
			id := d.Val()
			if err := rulestore.ValidID(id); err != nil {
				return d.Errf("grayroute: %v", err)
			}
			fields, lines, err := rulestore.UnmarshalFieldsTokens(d, rulestore.Gray, id)
			if err != nil {
				return err
			}
			if v, ok := fields["fallback_on_open"]; ok {
				h.refs = append(h.refs, rulestore.CaddyfileRef{Tok: lines["fallback_on_open"], Kind: rulestore.CircuitBreaker, ID: v})
			}
			if len(fields) == 0 {
				return d.Errf("grayroute: inline gray rule %q has no fields", id)
			}
			if _, err := rulestore.SpecFromFields(rulestore.Gray, fields); err != nil {
				return rulestore.ErrAtField(d.Token(), lines, err, "grayroute: inline gray rule %q: %v", id, err)
			}
			if err := addRule(RuleRef{ID: id, Inline: fields}); err != nil {
				return err
			}
		case "route":
			if !d.NextArg() {
				return d.Errf("grayroute: route needs a route name")
			}
			if h.Route != "" {
				return d.Errf("grayroute: route given twice")
			}
			h.Route = d.Val()
			if err := rulestore.ValidID(h.Route); err != nil {
				return d.Errf("grayroute: route: %v", err)
			}
			ref(rulestore.Binding, h.Route)
			if d.NextArg() {
				return d.ArgErr()
			}
		case "default_version":
			if !d.NextArg() {
				return d.ArgErr()
			}
			if err := ValidVersion(d.Val()); err != nil {
				return d.Errf("grayroute: default_version: %v", err)
			}
			h.DefaultVersion = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		case "header":
			if !d.NextArg() {
				return d.ArgErr()
			}
			if v := d.Val(); v != "off" && !rulestore.ValidHeaderName(v) {
				return d.Errf("grayroute: header: %q is not a valid header name", v)
			}
			h.Header = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return rulestore.UnknownField(d, "grayroute", opt, directiveNames...)
		}
	}
	if h.Route != "" && len(h.Rules) > 0 {
		return d.Errf("grayroute: give either a route or rules, not both")
	}
	if h.Route == "" && len(h.Rules) == 0 {
		return d.Errf("grayroute: no gray rules: give rule ids, inline gray rules or a route")
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
