package ratelimit

import (
	"encoding/json"
	"strings"

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
	if err := h.UnmarshalCaddyfile(hp.Dispenser); err != nil {
		return nil, err
	}
	if err := rulestore.DeclaredIn(hp).RequireAll("ratelimit", h.refs); err != nil {
		return nil, err
	}
	return h, h.checkClusterHasRedis(hp)
}

// checkClusterHasRedis fails a cluster rule in a Caddyfile whose rulestore
// has no redis, pointing at the line (Provision checks JSON configs too).
func (h *Handler) checkClusterHasRedis(hp httpcaddyfile.Helper) error {
	var store struct {
		Redis     json.RawMessage             `json:"redis"`
		RateLimit map[string]rulestore.Fields `json:"rate_limit"`
	}
	if app, ok := hp.Option("rulestore").(httpcaddyfile.App); ok {
		_ = json.Unmarshal(app.Value, &store)
	}
	if len(store.Redis) > 0 {
		return nil
	}
	cluster := func(f rulestore.Fields) bool { return strings.EqualFold(strings.TrimSpace(f["scope"]), "cluster") }
	if h.Fields != nil && cluster(h.Fields) {
		return errAt(h.scopeTok, "ratelimit: %s", errClusterNeedsRedis)
	}
	if h.Rule != "" && cluster(store.RateLimit[h.Rule]) {
		return errAt(h.ruleTok, "ratelimit rule %s: %s", h.Rule, errClusterNeedsRedis)
	}
	return nil
}

func errAt(tok caddyfile.Token, format string, args ...any) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Errf(format, args...)
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		h.Rule, h.ruleTok = d.Val(), d.Token()
		if err := rulestore.ValidID(h.Rule); err != nil {
			return d.Errf("ratelimit: %v", err)
		}
		h.refs = append(h.refs, rulestore.CaddyfileRef{Tok: h.ruleTok, Kind: rulestore.RateLimit, ID: h.Rule})
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
				h.Rule, h.ruleTok = id, scan.Token()
				h.refs = append(h.refs, rulestore.CaddyfileRef{Tok: scan.Token(), Kind: rulestore.RateLimit, ID: id})
			} else {
				h.Route = id
				h.refs = append(h.refs, rulestore.CaddyfileRef{Tok: scan.Token(), Kind: rulestore.Binding, ID: id})
			}
		default:
			if !contains(knownFields, scan.Val()) {
				return rulestore.UnknownField(scan, "ratelimit", scan.Val(), directiveNames()...)
			}
			if h.Rule != "" || h.Route != "" {
				return scan.Errf("ratelimit: inline rule field %s cannot be mixed with rule or route", scan.Val())
			}
			inline = true
			if scan.Val() == "scope" {
				h.scopeTok = scan.Token()
			}
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
