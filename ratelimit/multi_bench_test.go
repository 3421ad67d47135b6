package ratelimit

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkServeHTTPSeveral is BenchmarkServeHTTP's rule=store case with
// two rules of the store on the handler (`ratelimit bench_m1 bench_m2`),
// neither refusing: the cost of a second limit on a route.
func BenchmarkServeHTTPSeveral(b *testing.B) {
	f := map[string]any{"qps": "1e9", "key_resolver": "userId"}
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps":  map[string]any{"rulestore": map[string]any{"rate_limit": map[string]any{"bench_m1": f, "bench_m2": f}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	testcaddy.RunJSON(b, cfg)
	h := &Handler{Rules: handlerkit.Refs[*rulestore.RateLimitSpec]("bench_m1", "bench_m2")}
	if err := h.Provision(caddy.ActiveContext()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Cleanup() })
	respond := caddyhttp.StaticResponse{Body: "ok"}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return respond.ServeHTTP(w, r, nil)
	})
	br := newBenchRequests(10_000)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		clear(w.h)
		w.h["Server"] = serverHeader
		if err := h.ServeHTTP(w, br.next(i), next); err != nil {
			b.Fatal(err)
		}
		if w.h.Get("Ratelimit-Policy") == "" {
			b.Fatal("no RateLimit-Policy")
		}
	}
}
