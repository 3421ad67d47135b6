package clicmd_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// An overlay written with raw redis-cli (HSET and PUBLISH) of a rule one
// instance declares and the other does not: the other answers "unused"
// (not used here), lists nothing as invalid, and keeps
// sluice_rules_invalid at 0, since the declaring instance is live. An
// incomplete rule nobody declares is still rejected by both. The CLI's
// writes (patch, set, apply) say which live instances lack the
// declaration, on stderr, and exit 2.
func TestRawOverlayOfRuleDeclaredElsewhere(t *testing.T) {
	r := redistest.Start(t)
	a := testcaddy.Start(t, fmt.Sprintf(grayCaddyfile, r.URL(), grayDecl, testcaddy.FreePort(t)))
	b := testcaddy.Start(t, fmt.Sprintf(grayCaddyfile, r.URL(), "", testcaddy.FreePort(t)))
	for _, p := range []*testcaddy.Process{a, b} {
		testcaddy.Eventually(t, 10*time.Second, "connected to redis", func() bool {
			out, _, ok := sluice(t, p, "store")
			return ok && strings.Contains(out, `"connected": true`)
		})
	}
	redistest.Push(t, r.Client(), "gray:rule:canary_cli", "gateway:rules:gray", "canary_cli", "weight", "10")
	out, errOut, code := sluiceCode(t, a, "verdicts", "gray", "canary_cli", "--wait", "60s")
	if code != 2 || strings.Count(out, "accepted") != 1 || strings.Count(out, "unused") != 1 || strings.Contains(out, "rejected") {
		t.Fatalf("verdicts on a raw overlay of a rule declared on one instance of two: exit %d\n%s%s", code, out, errOut)
	}
	nameB := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "unused") {
			nameB = strings.Fields(line)[0]
		}
	}
	for _, args := range [][]string{{"invalid"}, {"store"}} {
		if out := mustSluice(t, b, args...); strings.Contains(out, "canary_cli") {
			t.Fatalf("sluice %s on the instance that does not declare the rule names it:\n%s", args[0], out)
		}
	}
	m := scrape(t, fmt.Sprintf("http://localhost:%d", b.AdminPort))
	seen := 0
	for name, v := range m {
		if strings.HasPrefix(name, "sluice_rules_invalid") {
			seen++
			if v != 0 {
				t.Fatalf("%s = %v on the instance that does not declare the rule", name, v)
			}
		}
	}
	if seen == 0 {
		t.Fatalf("no sluice_rules_invalid series on the instance that does not declare the rule")
	}

	// An incomplete rule that no instance declares is rejected by both.
	redistest.Push(t, r.Client(), "gray:rule:orphan_cli", "gateway:rules:gray", "orphan_cli", "weight", "10")
	testcaddy.Eventually(t, 30*time.Second, "an incomplete rule nobody declares is rejected by both", func() bool {
		out, _, _ := sluice(t, a, "verdicts", "gray", "orphan_cli")
		return strings.Count(out, "rejected") == 2
	})

	// The CLI's writes name the instance that lacks the declaration.
	dir := t.TempDir()
	set := filepath.Join(dir, "set.json")
	if err := os.WriteFile(set, []byte(`{"gray": {"canary_cli": {"weight": 30}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"rules", "patch", "gray", "canary_cli", "weight=20"},
		{"rules", "patch", "gray", "canary_cli", "weight=25", "--dry-run"},
		{"rules", "set", "gray", "canary_cli", "weight=20", "match_tag=X-Canary", "match_value=true", "target_version=v2", "fallback_version=v1"},
		{"apply", "-f", set},
	} {
		out, errOut, code := sluiceCode(t, a, args...)
		if args[1] == "patch" && !strings.Contains(strings.Join(args, " "), "--dry-run") && errOut != docWarning(t, nameB) {
			t.Fatalf("patch: stderr %q, want docs/rulestore.md's warning %q", errOut, docWarning(t, nameB))
		}
		if code != 2 || !strings.Contains(errOut, "warning: gray canary_cli") ||
			!strings.Contains(errOut, "live instance(s) "+nameB+" do not declare the rule") {
			t.Fatalf("sluice %s: exit %d, want 2 and a warning naming %s\n%s%s", strings.Join(args, " "), code, nameB, out, errOut)
		}
	}
	// A rule every live instance lacks, or declares, draws no warning.
	if out, errOut, code := sluiceCode(t, a, "rules", "patch", "gray", "orphan_cli", "weight=5", "match_tag=X-Canary",
		"match_value=true", "target_version=v2", "fallback_version=v1"); code != 0 || errOut != "" {
		t.Fatalf("patch of a rule no instance declares: exit %d\n%s%s", code, out, errOut)
	}
}

// docWarning is the warning docs/rulestore.md shows for a patch of gray
// canary_cli, naming instance name instead of the docs' own.
func docWarning(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/rulestore.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^warning: gray canary_cli written.*$`).Find(doc)
	if line == nil {
		t.Fatal("docs/rulestore.md shows no warning for gray canary_cli")
	}
	return strings.Replace(string(line), "vm:21381", name, 1) + "\n"
}
