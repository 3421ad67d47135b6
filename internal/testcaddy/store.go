package testcaddy

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// RunStoreRule runs a config with no admin endpoint whose rulestore holds
// one rule, of kind (the app's JSON key, e.g. "rate_limit") and id, and a
// binding route bound to it: what a handler provisioned with `<id>` or
// `route <route>` reads in a running config.
func RunStoreRule(t testing.TB, kind, id string, fields map[string]string, route string) {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"rulestore": map[string]any{
			kind:      map[string]any{id: fields},
			"binding": map[string]any{route: map[string]string{kind: id}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	RunJSON(t, cfg)
}

// Bound is a handler that reads its rule from the running config's store.
type Bound interface {
	caddy.Provisioner
	caddy.CleanerUpper
}

// EachBinding benchmarks, as sub-benchmarks rule and route, a handler
// bound to the rule of RunStoreRule by its id and one bound by its route:
// bind returns a handler with that one field set. Each is provisioned in
// the running config and cleaned up when b ends.
func EachBinding[H Bound](b *testing.B, id, route string, bind func(rule, route string) H, bench func(b *testing.B, h H)) {
	b.Helper()
	for _, name := range []string{"rule", "route"} {
		h := bind(id, "")
		if name == "route" {
			h = bind("", route)
		}
		if err := h.Provision(caddy.ActiveContext()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Cleanup() })
		b.Run(name, func(b *testing.B) { bench(b, h) })
	}
}
