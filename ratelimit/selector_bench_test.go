package ratelimit

import (
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkCurrent is the per-request rule resolution alone, for
// `ratelimit <id>` and for a route bound to that rule, in a running config.
func BenchmarkCurrent(b *testing.B) {
	testcaddy.RunStoreRule(b, "rate_limit", "cur_rl", map[string]string{"qps": "1e9", "key_resolver": "userId"}, "cur_route")
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
