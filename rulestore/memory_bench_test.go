package rulestore

import (
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// BenchmarkLookupWithoutRedis is the lookup of a static rule in a store
// without Redis, which first consults the (empty) in-memory layer of rules
// written through the admin API, and of a rule held in that layer.
func BenchmarkLookupWithoutRedis(b *testing.B) {
	app := &App{RateLimit: map[string]Fields{"static": {"qps": "1"}}}
	if err := app.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { app.Cleanup() }) // the memory layer goes with the last app
	b.Run("static_rule", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if app.Lookup(RateLimit, "static") == nil {
				b.Fatal("missing")
			}
		}
	})
	app.memory.put(&Rule{Kind: RateLimit, ID: "bench_mem", Fields: Fields{}})
	b.Run("memory_rule", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if app.Lookup(RateLimit, "bench_mem") == nil {
				b.Fatal("missing")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				app.Lookup(RateLimit, "static")
			}
		})
	})
}
