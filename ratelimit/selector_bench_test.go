package ratelimit

import (
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkCurrent is the per-request rule resolution alone, for
// `ratelimit <id>` and for a route bound to that rule, in a running config.
func BenchmarkCurrent(b *testing.B) {
	testcaddy.RunStoreRule(b, "rate_limit", "cur_rl", map[string]string{"qps": "1e9", "key_resolver": "userId"}, "cur_route")
	bind := func(rule, route string) *Handler { return &Handler{Rule: rule, Route: route} }
	testcaddy.EachBinding(b, "cur_rl", "cur_route", bind, func(b *testing.B, h *Handler) {
		if r, _ := h.current(); r == nil {
			b.Fatal("no rule in force")
		}
		b.ReportAllocs()
		for b.Loop() {
			if r, _ := h.current(); r == nil {
				b.Fatal("no rule")
			}
		}
	})
}
