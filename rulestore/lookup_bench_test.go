package rulestore

import (
	"fmt"
	"testing"
)

// BenchmarkLookup is the request path: one rule lookup with 10,000 rules
// held by the app's source (as loaded from Redis; the lookup is the same
// for every Source) and static rules beside them.
func BenchmarkLookup(b *testing.B) {
	src := new(memoryLayer)
	l := *NewLayer()
	for _, k := range Kinds() {
		l[k] = map[string]*Slot{}
	}
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("rule_%d", i)
		l[RateLimit][id] = NewSlot(&Rule{Kind: RateLimit, ID: id})
	}
	src.snap.Store(&l)
	app := &App{source: src, static: make([]map[string]*Rule, NumKinds()), overlays: make([]map[string]*overlaySlot, NumKinds())}
	app.static[RateLimit] = map[string]*Rule{"static": {ID: "static"}}
	// rule_7 is declared statically and overlaid by one field in Redis
	// (a kill switch): resolved once, then cached.
	app.static[RateLimit]["rule_7"] = &Rule{Kind: RateLimit, ID: "rule_7", Fields: Fields{"qps": "5", "burst": "9"}}
	app.overlays[RateLimit] = map[string]*overlaySlot{"rule_7": new(overlaySlot)}
	l[RateLimit]["rule_7"] = NewSlot(&Rule{Kind: RateLimit, ID: "rule_7", Fields: Fields{"qps": "1"}, Partial: true})
	b.Run("redis_rule", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if app.Lookup(RateLimit, "rule_4242") == nil {
				b.Fatal("missing")
			}
		}
	})
	b.Run("overlaid_static_rule", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if r := app.Lookup(RateLimit, "rule_7"); r == nil || r.Fields["burst"] != "9" {
				b.Fatal("overlay not resolved")
			}
		}
	})
	b.Run("static_rule", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if app.Lookup(RateLimit, "static") == nil {
				b.Fatal("missing")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				app.Lookup(RateLimit, "rule_4242")
			}
		})
	})
}
