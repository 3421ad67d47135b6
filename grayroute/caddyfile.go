package grayroute

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

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
	err := h.UnmarshalCaddyfile(hp.Dispenser)
	return h, err
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
	for d.NextArg() {
		if err := addRule(RuleRef{ID: d.Val()}); err != nil {
			return err
		}
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
			}
		case "gray":
			if !d.NextArg() {
				return d.Errf("grayroute: gray needs a rule id and a { field value ... } block")
			}
			id := d.Val()
			if err := rulestore.ValidID(id); err != nil {
				return d.Errf("grayroute: %v", err)
			}
			fields, err := rulestore.UnmarshalFields(d, rulestore.Gray, id)
			if err != nil {
				return err
			}
			if len(fields) == 0 {
				return d.Errf("grayroute: inline gray rule %q has no fields", id)
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
			if v := d.Val(); v != "off" && !validHeaderName(v) {
				return d.Errf("grayroute: header: %q is not a valid header name", v)
			}
			h.Header = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("grayroute: unknown option %q (want rule, route, gray, default_version, header)", opt)
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

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
