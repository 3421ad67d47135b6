package testcaddy

import (
	"encoding/json"
	"testing"
)

// RunStoreRule runs a config with no admin endpoint whose rulestore holds
// one rule, of kind (the app's JSON key, e.g. "rate_limit") and id, and a
// binding route bound to it: what a handler provisioned with `<id>` or
// `route <route>` reads in a running config.
func RunStoreRule(t testing.TB, kind, id string, fields map[string]string, route string) {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"rulestore": map[string]any{
			kind:      map[string]any{id: fields},
			"binding": map[string]any{route: map[string]string{kind: id}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	RunJSON(t, cfg)
}
