package testcaddy

import (
	"encoding/json"
	"testing"
)

// SubscribeEvents returns cfgJSON with Caddy's events app sending the named
// events to the event handler module `handler` (a test's recorder). The
// Caddyfile has no syntax for event subscriptions, so tests add it to the
// adapted JSON.
func SubscribeEvents(t testing.TB, cfgJSON []byte, handler string, events ...string) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatalf("config JSON: %v", err)
	}
	apps, _ := cfg["apps"].(map[string]any)
	if apps == nil {
		apps = map[string]any{}
		cfg["apps"] = apps
	}
	apps["events"] = map[string]any{
		"subscriptions": []any{map[string]any{
			"events":   events,
			"handlers": []any{map[string]any{"handler": handler}},
		}},
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
