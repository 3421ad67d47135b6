package clicmd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// The change commands against a running server with Redis: a kill switch
// with rules patch, invalid, history, diff, rollback, then apply (JSON and
// YAML, dry run, prune) and export.
func TestCLIChangeHistoryAndApply(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	ctx := context.Background()
	port := testcaddy.FreePort(t)
	p := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "redis "+r.URL(), port))
	testcaddy.Eventually(t, 10*time.Second, "connected to redis", func() bool {
		out, _, ok := sluice(t, p, "store")
		return ok && strings.Contains(out, `"connected": true`)
	})

	// A kill switch on the Caddyfile's breaker: one field.
	out := mustSluice(t, p, "rules", "patch", "circuit_breaker", "cli_cb", "state=force_open", "--dry-run")
	if !strings.Contains(out, `"dry_run": true`) || c.Exists(ctx, "circuit_breaker:rule:cli_cb").Val() != 0 {
		t.Fatalf("patch --dry-run wrote, or said nothing: %s", out)
	}
	mustSluice(t, p, "rules", "patch", "circuit_breaker", "cli_cb", "state=force_open")
	site := fmt.Sprintf("http://127.0.0.1:%d/", port)
	testcaddy.Eventually(t, 10*time.Second, "breaker forced open", func() bool {
		resp, _ := testcaddy.Get(t, site)
		return resp.StatusCode == 503
	})

	// A bad raw write is listed by `invalid`.
	redistest.Push(t, c, "circuit_breaker:rule:cli_cb", "gateway:rules:circuit_breaker", "cli_cb", "state", "sideways")
	testcaddy.Eventually(t, 10*time.Second, "invalid lists the rejected rule", func() bool {
		out, _, _ := sluice(t, p, "invalid")
		return strings.Contains(out, "rejected circuit_breaker cli_cb since ") && strings.Contains(out, "field state")
	})
	redistest.Push(t, c, "circuit_breaker:rule:cli_cb", "gateway:rules:circuit_breaker", "cli_cb", "state", "auto")
	testcaddy.Eventually(t, 10*time.Second, "breaker back to auto", func() bool {
		resp, _ := testcaddy.Get(t, site)
		return resp.StatusCode == 200
	})

	// history: newest first, by cli then redis.
	out = mustSluice(t, p, "history", "circuit_breaker", "cli_cb")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "redis") || !strings.Contains(lines[0], "state=auto") ||
		!strings.Contains(lines[1], " cli ") || !strings.Contains(lines[1], "state=force_open") {
		t.Fatalf("history:\n%s", out)
	}
	if out = mustSluice(t, p, "diff", "circuit_breaker", "cli_cb"); !strings.Contains(out, "-state=force_open") || !strings.Contains(out, "+state=auto") {
		t.Fatalf("diff:\n%s", out)
	}
	forceOpen := strings.Fields(lines[1])[1]
	mustSluice(t, p, "rollback", "circuit_breaker", "cli_cb", forceOpen)
	// Without a version, rollback says where versions come from.
	if _, errOut, ok := sluice(t, p, "rollback", "circuit_breaker", "cli_cb"); ok || !strings.Contains(errOut, "`caddy sluice history circuit_breaker cli_cb` lists them") {
		t.Fatalf("rollback without a version: ok=%v %s", ok, errOut)
	}
	testcaddy.Eventually(t, 10*time.Second, "rolled back to force_open", func() bool {
		resp, _ := testcaddy.Get(t, site)
		return resp.StatusCode == 503
	})

	// apply: a rule set in JSON creates a rule and a binding to it.
	dir := t.TempDir()
	set := filepath.Join(dir, "rules.json")
	os.WriteFile(set, []byte(`{
  "rate_limit": {"applied": {"limit_type": "token_bucket", "qps": 0.001, "burst": 1, "key_resolver": "ip"}},
  "binding": {"cli_route": {"rate_limit": "applied"}}
}`), 0o644)
	out = mustSluice(t, p, "apply", "-f", set, "--dry-run")
	if !strings.Contains(out, "+ rate_limit applied") || !strings.Contains(out, "+qps=0.001") || !strings.Contains(out, "2 to write, 0 to delete") {
		t.Fatalf("apply --dry-run:\n%s", out)
	}
	if c.Exists(ctx, "rate_limit:rule:applied").Val() != 0 {
		t.Fatal("apply --dry-run wrote")
	}
	// An invalid rule set writes nothing.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"rate_limit": {"applied": {"qps": "lots"}, "other": {"qps": 1}}}`), 0o644)
	if _, errOut, ok := sluice(t, p, "apply", "-f", bad); ok || !strings.Contains(errOut, "nothing written") || !strings.Contains(errOut, "qps") {
		t.Fatalf("apply of an invalid set: ok=%v %s", ok, errOut)
	}
	mustSluice(t, p, "apply", "-f", set)
	testcaddy.Eventually(t, 10*time.Second, "applied rule in force", func() bool {
		resp, _ := testcaddy.Get(t, site)
		return resp.StatusCode == 429
	})
	// A second apply changes nothing; export then apply is a no-op too.
	if out = mustSluice(t, p, "apply", "-f", set); !strings.Contains(out, "0 to write, 0 to delete") {
		t.Fatalf("second apply:\n%s", out)
	}
	exported := filepath.Join(dir, "export.yaml")
	mustSluice(t, p, "export", "-o", exported)
	b, _ := os.ReadFile(exported)
	if !strings.Contains(string(b), "applied:") || !strings.Contains(string(b), "state: force_open") {
		t.Fatalf("export:\n%s", b)
	}
	if out = mustSluice(t, p, "apply", "-f", exported, "--prune"); !strings.Contains(out, "0 to write, 0 to delete") {
		t.Fatalf("apply of the export:\n%s", out)
	}
	// YAML with --prune: only the breaker overlay stays; the rule and binding go.
	only := filepath.Join(dir, "only.yaml")
	os.WriteFile(only, []byte("circuit_breaker:\n  cli_cb:\n    state: force_open\n"), 0o644)
	out = mustSluice(t, p, "apply", "-f", only, "--prune")
	if !strings.Contains(out, "- binding cli_route") || !strings.Contains(out, "- rate_limit applied") || !strings.Contains(out, "0 to write, 2 to delete") {
		t.Fatalf("apply --prune:\n%s", out)
	}
	if c.Exists(ctx, "rate_limit:rule:applied", "gateway:binding:cli_route").Val() != 0 {
		t.Fatal("pruned keys still in Redis")
	}
	h := c.LRange(ctx, "gateway:history:rate_limit:applied", 0, -1).Val()
	if len(h) != 2 || !strings.Contains(h[0], `"via":"apply"`) || !strings.Contains(h[0], `"op":"delete"`) {
		t.Fatalf("history of the applied rule: %v", h)
	}
}
