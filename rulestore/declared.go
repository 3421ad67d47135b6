package rulestore

import (
	"encoding/json"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// CaddyfileRules is what a Caddyfile's global rulestore option declares.
// Directives check their rule references against it while the Caddyfile is
// adapted, where an error can still name the file and line.
type CaddyfileRules struct {
	redis bool
	rules []map[string]Fields // by kind
}

// DeclaredIn reads the rulestore global option of the Caddyfile being
// adapted (a config without one declares no rules and no Redis).
func DeclaredIn(h httpcaddyfile.Helper) *CaddyfileRules {
	c := new(CaddyfileRules)
	app, ok := h.Option("rulestore").(httpcaddyfile.App)
	if !ok {
		return c
	}
	var cfg App
	if json.Unmarshal(app.Value, &cfg) != nil {
		return c
	}
	return DeclaredBy(&cfg)
}

// DeclaredBy is what an App's config declares, before it is provisioned.
func DeclaredBy(a *App) *CaddyfileRules {
	c := &CaddyfileRules{redis: a.Redis != nil}
	c.rules = make([]map[string]Fields, NumKinds())
	for _, k := range Kinds() {
		c.rules[k] = a.staticFields(k)
	}
	return c
}

// HasRedis reports whether rules may also come from Redis.
func (c *CaddyfileRules) HasRedis() bool { return c.redis }

// Fields returns the declared fields of a rule, or nil.
func (c *CaddyfileRules) Fields(k Kind, id string) Fields {
	return ByKind(c.rules, k)[id]
}

// Has reports whether the rule is declared.
func (c *CaddyfileRules) Has(k Kind, id string) bool { return c.Fields(k, id) != nil }

// IDs lists the declared ids of a kind.
func (c *CaddyfileRules) IDs(k Kind) []string {
	return sortedIDs(ByKind(c.rules, k))
}

// Require fails, at tok's file and line, a reference to a rule that is not
// declared while no Redis is configured (with Redis it may live there).
// what prefixes the message, e.g. "ratelimit".
func (c *CaddyfileRules) Require(tok caddyfile.Token, what string, k Kind, id string) error {
	if c.redis {
		return nil
	}
	if err := CheckRef(c, k, id); err != nil {
		return ErrAt(tok, "%s: %v", what, err)
	}
	return nil
}

// CaddyfileRef is a rule reference read by a directive, checked against the
// global rulestore option once the directive is parsed.
type CaddyfileRef struct {
	Tok  caddyfile.Token
	Kind Kind
	ID   string
}

// RequireAll is Require for each reference, in order.
func (c *CaddyfileRules) RequireAll(what string, refs []CaddyfileRef) error {
	for _, r := range refs {
		if err := c.Require(r.Tok, what, r.Kind, r.ID); err != nil {
			return err
		}
	}
	return nil
}
