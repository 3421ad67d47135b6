package circuitbreaker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// recordEvents is an events.handlers module that keeps what it sees.
type recordEvents struct{}

var seen struct {
	mu     sync.Mutex
	events []string
}

func (recordEvents) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.cbtest_record", New: func() caddy.Module { return recordEvents{} }}
}

func (recordEvents) Handle(_ context.Context, e caddy.Event) error {
	seen.mu.Lock()
	defer seen.mu.Unlock()
	seen.events = append(seen.events, fmt.Sprintf("%s %v %v", e.Name(), e.Data["rule"], e.Data["to"]))
	return nil
}

func init() { caddy.RegisterModule(recordEvents{}) }

// Transitions are emitted as Caddy events a user can subscribe to.
func TestTransitionsEmitEvents(t *testing.T) {
	seen.mu.Lock()
	seen.events = nil
	seen.mu.Unlock()
	u := newUpstream(t)
	port := testcaddy.FreePort(t)
	cf := fmt.Sprintf(`{
	%s
	rulestore {
		circuit_breaker evt {
			failure_threshold 1
			open_duration 200ms
			success_threshold 1
		}
	}
}
http://127.0.0.1:%d {
	circuitbreaker evt
	reverse_proxy %s
}
`, testcaddy.Options(t), port, u.hostPort())
	cfgJSON, err := testcaddy.Adapt(cf)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON = testcaddy.SubscribeEvents(t, cfgJSON, "cbtest_record", "circuit_open", "circuit_half_open", "circuit_closed")
	testcaddy.RunJSON(t, cfgJSON) // skipped under -short; stopped at cleanup
	url := fmt.Sprintf("http://127.0.0.1:%d", port)

	trip(t, url, 1)
	expectOpen(t, u, url)
	testcaddy.Eventually(t, 5*time.Second, "breaker closes again", func() bool {
		code, _, _ := get(t, url)
		return code == 200
	})
	want := []string{"circuit_open evt open", "circuit_half_open evt half_open", "circuit_closed evt closed"}
	testcaddy.Eventually(t, 5*time.Second, fmt.Sprintf("events %v", want), func() bool {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return fmt.Sprint(seen.events) == fmt.Sprint(want)
	})
}
