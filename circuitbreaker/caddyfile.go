package circuitbreaker

import (
	"errors"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/rulestore"
)

// ParseCaddyfile parses the circuitbreaker directive.
func ParseCaddyfile(hp httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h := new(Handler)
	if err := h.UnmarshalCaddyfile(hp.Dispenser); err != nil {
		return nil, err
	}
	return h, rulestore.DeclaredIn(hp).RequireAll("circuitbreaker", h.refs)
}

// UnmarshalCaddyfile reads:
//
//	circuitbreaker [<matcher>] <rule-id>
//	circuitbreaker [<matcher>] {
//		rule <id> | route <name> | <rule fields...>
//		header <name> <value>   # repeatable; the open response's headers
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		h.Rule = d.Val()
		if err := rulestore.ValidID(h.Rule); err != nil {
			return d.Errf("circuitbreaker: %v", err)
		}
		h.refs = append(h.refs, rulestore.CaddyfileRef{Tok: d.Token(), Kind: rulestore.CircuitBreaker, ID: h.Rule})
		if d.NextArg() {
			return d.ArgErr()
		}
		if d.NextBlock(0) {
			return d.Err("circuitbreaker: give a rule id or a block, not both")
		}
		return nil
	}
	start := d.Token()
	fields := rulestore.Fields{}
	lines := map[string]caddyfile.Token{}
	var headers []string
	for d.NextBlock(0) {
		name, tok := d.Val(), d.Token()
		args := d.RemainingArgs()
		switch name {
		case "rule", "route":
			if len(args) != 1 {
				return d.Errf("circuitbreaker: %s wants one value", name)
			}
			if err := rulestore.ValidID(args[0]); err != nil {
				return d.Errf("circuitbreaker: %s: %v", name, err)
			}
			if h.Rule != "" || h.Route != "" {
				return d.Err("circuitbreaker: give one rule or route")
			}
			ref := rulestore.CaddyfileRef{Tok: tok, Kind: rulestore.CircuitBreaker, ID: args[0]}
			if name == "rule" {
				h.Rule = args[0]
			} else {
				h.Route, ref.Kind = args[0], rulestore.Binding
			}
			h.refs = append(h.refs, ref)
			continue
		case "header":
			// Each header line adds to the headers field.
			if len(args) < 2 {
				return d.Err("circuitbreaker: header wants <name> <value>")
			}
			headers = append(headers, args[0]+": "+strings.Join(args[1:], " "))
			if _, ok := lines["headers"]; !ok {
				lines["headers"] = tok
			}
			continue
		}
		if !slices.Contains(ruleFieldNames(), name) {
			return rulestore.UnknownField(d, "circuitbreaker", name, directiveNames()...)
		}
		if len(args) == 0 {
			return d.Errf("circuitbreaker: field %s needs a value", name)
		}
		if _, dup := fields[name]; dup {
			return d.Errf("circuitbreaker: field %s given twice", name)
		}
		fields[name] = strings.Join(args, " ")
		lines[name] = tok
	}
	if len(headers) > 0 {
		if _, dup := fields["headers"]; dup {
			return rulestore.ErrAt(lines["headers"], "circuitbreaker: use headers or header lines, not both")
		}
		fields["headers"] = strings.Join(headers, "; ")
	}
	switch {
	case (h.Rule != "" || h.Route != "") && len(fields) > 0:
		return d.Err("circuitbreaker: a rule or route cannot be combined with inline fields")
	case h.Rule == "" && h.Route == "" && len(fields) == 0:
		return rulestore.ErrAt(start, "circuitbreaker: give a rule id, a rule, a route or inline fields")
	case len(fields) == 0:
		return nil
	}
	if _, err := ParseRule("inline", fields); err != nil {
		tok := start
		var fe *rulestore.FieldError
		if errors.As(err, &fe) {
			if t, ok := lines[fe.Field]; ok {
				tok = t
			}
		}
		return rulestore.ErrAt(tok, "circuitbreaker: %v", err)
	}
	h.Inline = fields
	return nil
}
