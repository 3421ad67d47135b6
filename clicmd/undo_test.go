package clicmd_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// twoInstances starts two Caddy instances on cliCaddyfile sharing one
// Redis, connected.
func twoInstances(t *testing.T) (*redistest.Server, *testcaddy.Process, *testcaddy.Process) {
	t.Helper()
	r := redistest.Start(t)
	a := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "redis "+r.URL(), testcaddy.FreePort(t)))
	b := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "redis "+r.URL(), testcaddy.FreePort(t)))
	for _, p := range []*testcaddy.Process{a, b} {
		testcaddy.Eventually(t, 10*time.Second, "connected to redis", func() bool {
			out, _, ok := sluice(t, p, "store")
			return ok && strings.Contains(out, `"connected": true`)
		})
	}
	return r, a, b
}

// ruleVersion is the version GET answers for a rule, and its declared one.
func ruleVersion(t *testing.T, p *testcaddy.Process, kind, id string) (version, declared string) {
	t.Helper()
	var v struct {
		Version         string `json:"version"`
		DeclaredVersion string `json:"declared_version"`
	}
	if err := json.Unmarshal([]byte(mustSluice(t, p, "rules", "get", kind, id)), &v); err != nil {
		t.Fatal(err)
	}
	return v.Version, v.DeclaredVersion
}

// The loop write, verify, undo, verify closes on a Caddyfile-declared rule:
// after an undo (DELETE through the CLI, or DEL in Redis) every live
// instance reports the declared version and `verdicts --wait` exits 0; the
// history names the declared version; a first overlay that every instance
// rejected rolls back to the declared version.
func TestCLIUndoVerifiesOnTheDeclaredVersion(t *testing.T) {
	r, a, b := twoInstances(t)
	c := r.Client()
	declared, _ := ruleVersion(t, a, "circuit_breaker", "cli_cb")

	// Write, verify.
	mustSluice(t, a, "rules", "patch", "circuit_breaker", "cli_cb", "failure_threshold=7")
	mustSluice(t, a, "verdicts", "circuit_breaker", "cli_cb", "--wait", "60s")

	// Undo, verify: both instances serve the declared rule again.
	out := mustSluice(t, a, "rules", "delete", "circuit_breaker", "cli_cb")
	if !strings.Contains(out, `"version": "`+declared+`"`) {
		t.Fatalf("delete answer does not name the declared version %s:\n%s", declared, out)
	}
	out, errOut, ok := sluice(t, b, "verdicts", "circuit_breaker", "cli_cb", "--wait", "60s")
	if !ok || strings.Count(out, "deleted  "+declared) != 2 {
		t.Fatalf("verdicts --wait after an undo: ok=%v\n%s%s", ok, out, errOut)
	}

	// The history names the declared version on both sides of the overlay.
	var h []struct {
		Version     string `json:"version"`
		PrevVersion string `json:"prev_version"`
		Op          string `json:"op"`
	}
	json.Unmarshal([]byte(mustSluice(t, a, "history", "circuit_breaker", "cli_cb", "--raw")), &h)
	if len(h) != 2 || h[0].Op != "delete" || h[0].Version != declared || h[1].PrevVersion != declared || h[0].PrevVersion != h[1].Version {
		t.Fatalf("history (declared %s): %+v", declared, h)
	}

	// A bad raw overlay, rejected everywhere, undone with DEL: the
	// rejection no longer stands, and the undo verifies.
	redistest.Push(t, c, "circuit_breaker:rule:cli_cb", "gateway:rules:circuit_breaker", "cli_cb", "failure_threshold", "abc")
	testcaddy.Eventually(t, 30*time.Second, "both instances reject the bad overlay", func() bool {
		out, _, _ := sluice(t, a, "verdicts", "circuit_breaker", "cli_cb")
		return strings.Count(out, "rejected") == 2
	})
	c.Del(t.Context(), "circuit_breaker:rule:cli_cb")
	c.Publish(t.Context(), "gateway:rules:circuit_breaker", "cli_cb")
	out, errOut, ok = sluice(t, a, "verdicts", "circuit_breaker", "cli_cb", "--wait", "60s")
	if !ok || strings.Count(out, "deleted  "+declared) != 2 {
		t.Fatalf("verdicts --wait after DEL of a rejected overlay: ok=%v\n%s%s", ok, out, errOut)
	}
	if out := mustSluice(t, b, "invalid"); strings.Contains(out, "cli_cb") {
		t.Fatalf("invalid after the undo:\n%s", out)
	}

	// A first bad overlay (no history): history names the declared version,
	// rollback to it undoes the overlay and answers as the history records it.
	c.Del(t.Context(), "gateway:history:circuit_breaker:cli_cb")
	redistest.Push(t, c, "circuit_breaker:rule:cli_cb", "gateway:rules:circuit_breaker", "cli_cb", "failure_threshold", "abc")
	testcaddy.Eventually(t, 30*time.Second, "both instances reject the bad overlay", func() bool {
		out, _, _ := sluice(t, a, "verdicts", "circuit_breaker", "cli_cb")
		return strings.Count(out, "rejected") == 2
	})
	if _, d := ruleVersion(t, b, "circuit_breaker", "cli_cb"); d != declared {
		t.Fatalf("GET declared_version %q, want %s", d, declared)
	}
	out = mustSluice(t, a, "history", "circuit_breaker", "cli_cb")
	if !strings.Contains(out, "no recorded changes") || !strings.Contains(out, "caddy sluice rollback circuit_breaker cli_cb "+declared) {
		t.Fatalf("history of a first rejected overlay:\n%s", out)
	}
	out = mustSluice(t, a, "rollback", "circuit_breaker", "cli_cb", declared)
	if !strings.Contains(out, `"op": "rollback"`) || !strings.Contains(out, `"version": "`+declared+`"`) {
		t.Fatalf("rollback to the declared version:\n%s", out)
	}
	out, errOut, ok = sluice(t, b, "verdicts", "circuit_breaker", "cli_cb", "--wait", "60s")
	if !ok || strings.Count(out, "deleted  "+declared) != 2 {
		t.Fatalf("verdicts --wait after rollback to the declared version: ok=%v\n%s%s", ok, out, errOut)
	}
	if c.Exists(t.Context(), "circuit_breaker:rule:cli_cb").Val() != 0 {
		t.Fatal("the overlay is still stored after rollback to the declared version")
	}
	json.Unmarshal([]byte(mustSluice(t, a, "history", "circuit_breaker", "cli_cb", "--raw")), &h)
	if len(h) == 0 || h[0].Op != "rollback" || h[0].Version != declared {
		t.Fatalf("history after rollback to the declared version: %+v", h)
	}
	// Rolling back to where the rule is already writes nothing.
	mustSluice(t, a, "rollback", "circuit_breaker", "cli_cb", declared)
	var again []json.RawMessage
	json.Unmarshal([]byte(mustSluice(t, a, "history", "circuit_breaker", "cli_cb", "--raw")), &again)
	if len(again) != len(h) {
		t.Fatalf("a rollback to the current version recorded a change: %d entries, had %d", len(again), len(h))
	}
}
