package circuitbreaker

import (
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkHandlerClosedStore is BenchmarkHandlerClosed with the rule read
// from the store, as `circuitbreaker <id>` and `route` provision it in a
// running config: the difference is the per-request rule resolution.
func BenchmarkHandlerClosedStore(b *testing.B) {
	testcaddy.RunStoreRule(b, "circuit_breaker", "bench_cb", map[string]string{"window": "100", "failure_rate": "50"}, "bench_route")
	for _, name := range []string{"rule", "route"} {
		h := new(Handler)
		if name == "rule" {
			h.Rule = "bench_cb"
		} else {
			h.Route = "bench_route"
		}
		if err := h.Provision(caddy.ActiveContext()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Cleanup() })
		if h.rule() == nil {
			b.Fatalf("%s: no rule in force", name)
		}
		b.Run(name, func(b *testing.B) {
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
}
