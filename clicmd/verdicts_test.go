package clicmd_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A stopped instance's verdict is shown as stopped, never as a lagging
// one: `caddy sluice verdicts --wait` waits on live instances only.
func TestCLIVerdictsWaitOnLiveInstancesOnly(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	a := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "redis "+r.URL(), testcaddy.FreePort(t)))
	b := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "redis "+r.URL(), testcaddy.FreePort(t)))
	redistest.Push(t, c, "circuit_breaker:rule:cli_cb", "gateway:rules:circuit_breaker", "cli_cb", "failure_threshold", "7")
	out := mustSluice(t, a, "verdicts", "circuit_breaker", "cli_cb", "--wait", "30s")
	if strings.Count(out, " live ") != 2 || strings.Count(out, "accepted") != 2 {
		t.Fatalf("verdicts of two live instances:\n%s", out)
	}

	b.Stop() // killed: its heartbeat expires, its verdict stays
	redistest.Push(t, c, "circuit_breaker:rule:cli_cb", "gateway:rules:circuit_breaker", "cli_cb", "failure_threshold", "8")
	start := time.Now()
	out = mustSluice(t, a, "verdicts", "circuit_breaker", "cli_cb", "--wait", "60s")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Count(out, "(stopped: not waited on)") != 1 || strings.Count(out, " live ") != 1 || strings.Contains(out, "not seen yet") {
		t.Fatalf("verdicts after one instance stopped (waited %v):\n%s", time.Since(start), out)
	}
}
