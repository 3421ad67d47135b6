package rulestore

import (
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// A handle answers as Lookup does through every change of the in-memory
// overlay: a static rule, an overriding rule written, updated in place,
// deleted (the static rule is back), and an id that appears later.
func TestHandleFollowsLookup(t *testing.T) {
	a := &App{RateLimit: map[string]Fields{"static_h": {"qps": "1"}}}
	if err := a.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Cleanup() }) // the memory layer goes with the last app
	hs, hl := a.Handle(RateLimit, "static_h"), a.Handle(RateLimit, "later_h")
	check := func(step string) {
		t.Helper()
		for _, h := range []*Handle{hs, hl} {
			if got, want := h.Rule(), a.Lookup(RateLimit, h.ID()); got != want {
				t.Fatalf("%s: handle %s gives %+v, Lookup %+v", step, h.ID(), got, want)
			}
		}
	}
	check("static")
	if hs.Rule() == nil || hs.Rule().Source != "static" || hl.Rule() != nil {
		t.Fatalf("static: %+v %+v", hs.Rule(), hl.Rule())
	}
	over := &Rule{Kind: RateLimit, ID: "static_h", Fields: Fields{"qps": "2"}, Source: "memory"}
	a.memory.put(over)
	check("written")
	if hs.Rule().Fields["qps"] != "2" {
		t.Fatal("written: the handle does not see the overlay")
	}
	upd := &Rule{Kind: RateLimit, ID: "static_h", Fields: Fields{"qps": "3"}, Source: "memory"}
	a.memory.put(upd) // same id: swapped in its slot, same layer
	check("updated")
	if hs.Rule().Fields["qps"] != "3" {
		t.Fatal("updated: the handle does not see the update")
	}
	later := &Rule{Kind: RateLimit, ID: "later_h", Fields: Fields{"qps": "4"}, Source: "memory"}
	a.memory.put(later)
	check("new id")
	if hl.Rule() != later {
		t.Fatal("new id: the handle does not see it")
	}
	a.memory.remove(RateLimit, "static_h")
	check("deleted")
	if hs.Rule() == nil || hs.Rule().Source != "static" {
		t.Fatalf("deleted: %+v, want the static rule back", hs.Rule())
	}
}

// BenchmarkHandleRule is the hot-path read of a held rule.
func BenchmarkHandleRule(b *testing.B) {
	a := &App{RateLimit: map[string]Fields{"h": {"qps": "1"}}}
	if err := a.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	h := a.Handle(RateLimit, "h")
	b.ReportAllocs()
	for b.Loop() {
		if h.Rule() == nil {
			b.Fatal("no rule")
		}
	}
}
