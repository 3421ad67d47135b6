package circuitbreaker

import (
	"net/http/httptest"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkHandlerClosedStore is BenchmarkHandlerClosed with the rule read
// from the store, as `circuitbreaker <id>` and `route` provision it in a
// running config: the difference is the per-request rule resolution.
func BenchmarkHandlerClosedStore(b *testing.B) {
	testcaddy.RunStoreRule(b, "circuit_breaker", "bench_cb", map[string]string{"window": "100", "failure_rate": "50"}, "bench_route")
	bind := func(rule, route string) *Handler { return &Handler{Rule: rule, Route: route} }
	testcaddy.EachBinding(b, "bench_cb", "bench_route", bind, func(b *testing.B, h *Handler) {
		if h.rule() == nil {
			b.Fatal("no rule in force")
		}
		req := httptest.NewRequest("GET", "/", nil)
		w := httptest.NewRecorder()
		b.ReportAllocs()
		for b.Loop() {
			if err := h.ServeHTTP(w, req, nopNext{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
