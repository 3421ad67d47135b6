package ratelimit

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/rulestore"
)

// ParseCaddyfile parses the ratelimit directive:
//
//	ratelimit [<matcher>] <rule-id>
//	ratelimit [<matcher>] {
//		rule <id> | route <name> | <rule field> <value...> ...
//	}
func ParseCaddyfile(hp httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h := new(Handler)
	err := h.UnmarshalCaddyfile(hp.Dispenser)
	return h, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		h.Rule = d.Val()
		if err := rulestore.ValidID(h.Rule); err != nil {
			return d.Errf("ratelimit: %v", err)
		}
		if d.NextArg() {
			return d.ArgErr()
		}
		if d.NextBlock(0) {
			return d.Err("ratelimit <rule-id> takes no block")
		}
		return nil
	}
	// Read the block once to see whether it names a rule or declares one;
	// an inline block goes through the rule store's field reader, which
	// validates the rule and points errors at the field's line.
	block := d.NewFromNextSegment()
	scan := caddyfile.NewDispenser(collect(block))
	scan.Next()
	inline := false
	for scan.NextBlock(0) {
		switch scan.Val() {
		case "rule", "route":
			if inline {
				return scan.Errf("ratelimit: %s cannot be mixed with inline rule fields", scan.Val())
			}
			which := scan.Val()
			if !scan.NextArg() {
				return scan.ArgErr()
			}
			id := scan.Val()
			if err := rulestore.ValidID(id); err != nil {
				return scan.Errf("ratelimit %s: %v", which, err)
			}
			if scan.NextArg() {
				return scan.ArgErr()
			}
			if h.Rule != "" || h.Route != "" {
				return scan.Errf("ratelimit: give one of rule or route, once")
			}
			if which == "rule" {
				h.Rule = id
			} else {
				h.Route = id
			}
		default:
			if h.Rule != "" || h.Route != "" {
				return scan.Errf("ratelimit: inline rule field %s cannot be mixed with rule or route", scan.Val())
			}
			inline = true
			scan.RemainingArgs()
		}
	}
	if !inline {
		if h.Rule == "" && h.Route == "" {
			return d.Err("ratelimit: give a rule id, a block with rule <id> or route <name>, or inline rule fields")
		}
		return nil
	}
	fd := caddyfile.NewDispenser(collect(block))
	fd.Next()
	f, err := rulestore.UnmarshalFields(fd, rulestore.RateLimit, "inline")
	if err != nil {
		return err
	}
	h.Fields = f
	return nil
}

// collect returns every token of a dispenser, without consuming the caller's.
func collect(d *caddyfile.Dispenser) []caddyfile.Token {
	var toks []caddyfile.Token
	for d.Next() {
		toks = append(toks, d.Token())
	}
	d.Reset()
	return toks
}
