package grayroute

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/rulestore"
)

// A decision keeps the rules its handles answered until the store changes:
// a rule written (a new layer) and then updated in place (the same slot)
// are each seen by the very next decision.
func TestHeldRulesFollowEveryChange(t *testing.T) {
	store := &rulestore.App{Gray: map[string]rulestore.Fields{
		"other": {"target_version": "v9", "match_tag": "X-Other", "match_value": "yes"},
		"beta":  {"target_version": "v2", "weight": "0", "match_tag": "X-Beta", "match_value": "yes"},
	}}
	if err := store.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Cleanup() }) // the memory layer goes with the last app
	h := &Handler{Rules: []RuleRef{{ID: "other"}, {ID: "beta"}}}
	if err := h.setup(store, nil, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Beta", "yes")
	r.Header.Set("X-User-Id", "u1")
	want := func(step, version string) {
		t.Helper()
		if d, _ := h.decide(r); d.version != version || d.ruleAny != "beta" {
			t.Fatalf("%s: decided %s by %v, want %s by beta", step, d.version, d.ruleAny, version)
		}
	}
	want("static, weight 0", "v1")
	for _, c := range []struct {
		step, field, value, version string
	}{
		{"written, weight 100", "weight", "100", "v2"},
		{"updated in place, target v3", "target_version", "v3", "v3"},
		{"updated in place, weight 0", "weight", "0", "v1"},
	} {
		ok, err := store.Patch(context.Background(), rulestore.Gray, "beta", nil, rulestore.Fields{c.field: c.value})
		if err != nil || !ok {
			t.Fatalf("%s: patch: %v %v", c.step, ok, err)
		}
		want(c.step, c.version)
	}
}
