package circuitbreaker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// recordKeys is an events.handlers module that keeps each event's rule
// and key.
type recordKeys struct{}

var seenKeys struct {
	mu   sync.Mutex
	keys map[string][]string // rule -> keys
}

func (recordKeys) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.cbtest_keys", New: func() caddy.Module { return recordKeys{} }}
}

func (recordKeys) Handle(_ context.Context, e caddy.Event) error {
	seenKeys.mu.Lock()
	defer seenKeys.mu.Unlock()
	rule := fmt.Sprint(e.Data["rule"])
	seenKeys.keys[rule] = append(seenKeys.keys[rule], fmt.Sprint(e.Data["key"]))
	return nil
}

func init() { caddy.RegisterModule(recordKeys{}) }

// TestKeysMaskedUnlessRawKeys: a breaker keyed on a user id shows the key
// masked in its transition log line, its events, /sluice/state and its
// metric labels, unless the rule sets raw_keys (as the rate limiter does).
func TestKeysMaskedUnlessRawKeys(t *testing.T) {
	seenKeys.mu.Lock()
	seenKeys.keys = map[string][]string{}
	seenKeys.mu.Unlock()
	u := newUpstream(t)
	u.set("500")
	port, admin := testcaddy.FreePort(t), testcaddy.FreePort(t)
	logPath := filepath.Join(t.TempDir(), "caddy.log")
	cf := fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	log {
		output file %s
		format json
	}
	rulestore {
		circuit_breaker masked {
			failure_threshold 1
			open_duration 1h
			key {http.request.header.X-User-Id}
		}
		circuit_breaker raw {
			failure_threshold 1
			open_duration 1h
			key {http.request.header.X-User-Id}
			raw_keys true
		}
	}
}
http://127.0.0.1:%d {
	handle /masked {
		circuitbreaker masked
		reverse_proxy %s
	}
	handle /raw {
		circuitbreaker raw
		reverse_proxy %s
	}
}
`, admin, logPath, port, u.hostPort(), u.hostPort())
	cfgJSON, err := testcaddy.Adapt(cf)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON = testcaddy.SubscribeEvents(t, cfgJSON, "cbtest_keys", "circuit_open")
	if err := caddy.Load(cfgJSON, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caddy.Stop() })

	const user = "alice-secret"
	masked := handlerkit.MaskKey(user)
	for _, rule := range []string{"masked", "raw"} {
		url := fmt.Sprintf("http://127.0.0.1:%d/%s", port, rule)
		trip(t, url, 1, "X-User-Id: "+user)
		expectOpen(t, u, url, "X-User-Id: "+user)
	}
	want := map[string]string{"masked": masked, "raw": user}

	// Events.
	testcaddy.Eventually(t, 5*time.Second, "two circuit_open events", func() bool {
		seenKeys.mu.Lock()
		defer seenKeys.mu.Unlock()
		return len(seenKeys.keys["masked"]) == 1 && len(seenKeys.keys["raw"]) == 1
	})
	for rule, key := range want {
		if got := seenKeys.keys[rule][0]; got != key {
			t.Errorf("rule %s: event key %q, want %q", rule, got, key)
		}
	}

	// /sluice/state.
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/sluice/state", admin))
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Circuitbreaker struct {
			Rules []struct {
				Rule      string `json:"rule"`
				KeyStates []struct {
					Key   string `json:"key"`
					State string `json:"state"`
				} `json:"key_states"`
			} `json:"rules"`
		} `json:"circuitbreaker"`
	}
	err = json.NewDecoder(resp.Body).Decode(&state)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, r := range state.Circuitbreaker.Rules {
		key, ok := want[r.Rule]
		if !ok {
			continue
		}
		found++
		if len(r.KeyStates) != 1 || r.KeyStates[0].Key != key || r.KeyStates[0].State != "open" {
			t.Errorf("rule %s: key_states %+v, want one open breaker keyed %q", r.Rule, r.KeyStates, key)
		}
	}
	if found != 2 {
		t.Errorf("state lists %d of the two rules: %+v", found, state)
	}

	// The transition log lines.
	testcaddy.Eventually(t, 5*time.Second, "two transition log lines", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), "circuit breaker state change") >= 2
	})
	b, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "circuit breaker state change") {
			continue
		}
		for rule, key := range want {
			if strings.Contains(line, `"rule":"`+rule+`"`) && !strings.Contains(line, `"key":"`+key+`"`) {
				t.Errorf("rule %s: log line without key %q: %s", rule, key, line)
			}
		}
		if strings.Contains(line, `"rule":"masked"`) && strings.Contains(line, user) {
			t.Errorf("the masked rule logged the raw key: %s", line)
		}
	}

	// Metric labels.
	resp, err = http.Get(fmt.Sprintf("http://localhost:%d/metrics", admin))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(line, "sluice_circuitbreaker_state{") && strings.Contains(line, `rule="masked"`) && strings.Contains(line, user) {
			t.Errorf("the masked rule exports the raw key: %s", line)
		}
	}
	if !strings.Contains(string(metrics), `key="`+masked+`",rule="masked"`) {
		t.Errorf("no state series for the masked key %s", masked)
	}
}
