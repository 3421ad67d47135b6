package ratelimit

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// The handler keeps the rule it found while the store is unchanged; a rule
// updated, or a route rebound, between two requests is in force on the
// second (the kept answer goes when the store's count of changes moves).
func TestNextRequestSeesStoreChange(t *testing.T) {
	ctx, app := runStore(t, map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"rulestore": map[string]any{
			"rate_limit": map[string]any{
				"sel_a": map[string]string{"qps": "1", "burst": "5", "key_resolver": "global"},
				"sel_b": map[string]string{"qps": "1", "burst": "7", "key_resolver": "global"},
			},
			"binding": map[string]any{"sel_route": map[string]string{"rate_limit": "sel_a"}},
		}},
	})
	byRule, byRoute := &Handler{}, &Handler{}
	byRule.Rule, byRoute.Route = "sel_a", "sel_route"
	for _, h := range []*Handler{byRule, byRoute} {
		if err := h.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Cleanup() })
	}
	expect := func(step string, h *Handler, id string) {
		t.Helper()
		want := app.Lookup(rulestore.RateLimit, id).Value.(*Rule)
		for range 2 { // the second answer comes from the kept one
			if got, _ := h.current(); got != want {
				t.Fatalf("%s: handler has %+v, the store %+v", step, got, want)
			}
		}
	}
	expect("start", byRule, "sel_a")
	expect("start", byRoute, "sel_a")
	patch := func(k rulestore.Kind, id string, f rulestore.Fields) {
		t.Helper()
		if ok, err := app.Patch(context.Background(), k, id, nil, f); !ok || err != nil {
			t.Fatalf("patch %s %s: %v %v", k, id, ok, err)
		}
	}
	patch(rulestore.RateLimit, "sel_a", rulestore.Fields{"burst": "9"})
	expect("rule updated", byRule, "sel_a")
	expect("rule updated", byRoute, "sel_a")
	patch(rulestore.Binding, "sel_route", rulestore.Fields{"rate_limit": "sel_b"})
	expect("route rebound", byRoute, "sel_b")
	patch(rulestore.RateLimit, "sel_b", rulestore.Fields{"burst": "11"})
	expect("bound rule updated", byRoute, "sel_b")
}

// Requests on two goroutines read the kept answer while the store changes
// (run with -race): each answer is a rule the store held, and once the
// writes are done the next request has the last one.
func TestKeptRuleUnderConcurrentChanges(t *testing.T) {
	ctx, app := runStore(t, map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"rulestore": map[string]any{
			"rate_limit": map[string]any{"sel_c": map[string]string{"qps": "1", "burst": "1", "key_resolver": "global"}},
		}},
	})
	h := &Handler{}
	h.Rule = "sel_c"
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Cleanup() })
	done := make(chan struct{})
	errs := make(chan string, 2)
	for range 2 {
		go func() {
			for {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				if r, _ := h.current(); r == nil || r.ID != "sel_c" {
					errs <- "no rule sel_c in force"
					return
				}
			}
		}()
	}
	for i := 2; i <= 200; i++ {
		f := rulestore.Fields{"burst": strconv.Itoa(i)}
		if ok, err := app.Patch(context.Background(), rulestore.RateLimit, "sel_c", nil, f); !ok || err != nil {
			t.Fatalf("patch: %v %v", ok, err)
		}
	}
	close(done)
	for range 2 {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
	if got, _ := h.current(); got != app.Lookup(rulestore.RateLimit, "sel_c").Value.(*Rule) || got.Limits.Burst != 200 {
		t.Fatalf("after the writes the handler has %+v", got)
	}
}

// runStore runs cfg (a whole config) and returns its context and rule
// store, for handlers provisioned by hand against it.
func runStore(t *testing.T, cfg map[string]any) (caddy.Context, *rulestore.App) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testcaddy.RunJSON(t, raw)
	ctx := caddy.ActiveContext()
	v, err := ctx.App("rulestore")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, v.(*rulestore.App)
}
