package ratelimit

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkCurrent is the per-request rule resolution alone, for
// `ratelimit <id>` and for a route bound to that rule, in a running config.
func BenchmarkCurrent(b *testing.B) {
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"rulestore": map[string]any{
			"rate_limit": map[string]any{"cur_rl": map[string]string{"qps": "1e9", "key_resolver": "userId"}},
			"binding":    map[string]any{"cur_route": map[string]string{"rate_limit": "cur_rl"}},
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	testcaddy.RunJSON(b, cfg)
	for _, name := range []string{"rule", "route"} {
		h := new(Handler)
		if name == "rule" {
			h.Rule = "cur_rl"
		} else {
			h.Route = "cur_route"
		}
		if err := h.Provision(caddy.ActiveContext()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Cleanup() })
		if r, _ := h.current(); r == nil {
			b.Fatalf("%s: no rule in force", name)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r, _ := h.current(); r == nil {
					b.Fatal("no rule")
				}
			}
		})
	}
}
