package grayroute

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
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
var ParseCaddyfile = handlerkit.Parser[Handler]("grayroute")

// Adapting is what the handler keeps while its Caddyfile block is adapted.
func (h *Handler) Adapting() *handlerkit.Adapted { return &h.adapted }

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens; the rule
// list is handlerkit's, the options grayroute's own.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	dir := handlerkit.Directive{Name: "grayroute", Kind: rulestore.Gray, List: "gray", ListOnly: true, ListNeedsID: true,
		RefFields: map[string]rulestore.Kind{"fallback_on_open": rulestore.CircuitBreaker},
		Options: []handlerkit.Option{
			{Name: "default_version", Parse: h.parseDefaultVersion},
			{Name: "header", Parse: h.parseHeader},
		}}
	p, err := dir.ParseCaddyfile(d)
	if err != nil {
		return err
	}
	h.adapted.Take(p)
	sel, err := handlerkit.ToSelection[*rulestore.GraySpec](p)
	h.Rules, h.Route, h.OnMissingRule = sel.Rules, sel.Route, sel.OnMissingRule
	return err
}

func (h *Handler) parseDefaultVersion(d *caddyfile.Dispenser) error {
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
	return nil
}

func (h *Handler) parseHeader(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	if v := d.Val(); v != "off" && !syntax.ValidHeaderName(v) {
		return d.Errf("grayroute: header: %q is not a valid header name", v)
	}
	h.Header = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
