package clicmd_test

import (
	"context"
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
	r, a, b := twoLiveVerdicts(t)
	c := r.Client()

	b.Stop() // killed: its heartbeat expires, its verdict stays
	redistest.Push(t, c, "circuit_breaker:rule:cli_cb", "gateway:rules:circuit_breaker", "cli_cb", "failure_threshold", "8")
	start := time.Now()
	out := mustSluice(t, a, "verdicts", "circuit_breaker", "cli_cb", "--wait", "60s")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Count(out, "(stopped: not waited on)") != 1 || strings.Count(out, " live ") != 1 || strings.Contains(out, "not seen yet") {
		t.Fatalf("verdicts after one instance stopped (waited %v):\n%s", time.Since(start), out)
	}
}

// A stopped instance's verdict rows do not pile up: shown as stopped
// while its heartbeat is fresh, then pruned from the verdict hash (not
// kept the hash's 24 hours).
func TestCLIVerdictsPruneStoppedInstances(t *testing.T) {
	r, a, b := twoLiveVerdicts(t)
	c := r.Client()
	b.Stop() // killed: its heartbeat expires
	var out string
	testcaddy.Eventually(t, 60*time.Second, "the stopped instance shown as stopped", func() bool {
		out = mustSluice(t, a, "verdicts", "circuit_breaker", "cli_cb")
		return strings.Count(out, "(stopped: not waited on)") == 1
	})
	testcaddy.Eventually(t, 90*time.Second, "the stopped instance's row pruned", func() bool {
		out = mustSluice(t, a, "verdicts", "circuit_breaker", "cli_cb")
		return !strings.Contains(out, "stopped")
	})
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || strings.Count(out, " live ") != 1 || strings.Count(out, "accepted") != 1 {
		t.Fatalf("verdicts after the stopped instance's row was pruned:\n%s", out)
	}
	if n := c.HLen(context.Background(), "gateway:status:circuit_breaker:cli_cb").Val(); n != 1 {
		t.Fatalf("verdict hash holds %d rows after the prune, want 1 (the live instance's)", n)
	}
}

// twoLiveVerdicts starts two instances on one Redis, writes cli_cb there
// and waits until both report it accepted.
func twoLiveVerdicts(t *testing.T) (r *redistest.Server, a, b *testcaddy.Process) {
	t.Helper()
	r = redistest.Start(t)
	a = testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "redis "+r.URL(), testcaddy.FreePort(t)))
	b = testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "redis "+r.URL(), testcaddy.FreePort(t)))
	redistest.Push(t, r.Client(), "circuit_breaker:rule:cli_cb", "gateway:rules:circuit_breaker", "cli_cb", "failure_threshold", "7")
	out := mustSluice(t, a, "verdicts", "circuit_breaker", "cli_cb", "--wait", "30s")
	if strings.Count(out, " live ") != 2 || strings.Count(out, "accepted") != 2 {
		t.Fatalf("verdicts of two live instances:\n%s", out)
	}
	return r, a, b
}
