package clicmd_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// grayCaddyfile declares the gray rule canary_cli (with %s: its
// declaration, or nothing) on an instance of a rolling deploy.
const grayCaddyfile = `{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
		%s
	}
}
http://127.0.0.1:%d {
	respond "ok"
}
`

const grayDecl = `gray canary_cli {
			match_tag        X-Canary
			match_value      true
			target_version   v2
			fallback_version v1
		}`

// A rule declared on some instances only: an overlay of it is taken where
// it is declared, and the others answer "unused" (not used here), not
// rejected: nothing is listed as invalid there, and `verdicts --wait`
// names them and exits 2. The undo verifies the same way.
func TestCLIRuleDeclaredOnSomeInstancesOnly(t *testing.T) {
	r := redistest.Start(t)
	a := testcaddy.Start(t, fmt.Sprintf(grayCaddyfile, r.URL(), grayDecl, testcaddy.FreePort(t)))
	b := testcaddy.Start(t, fmt.Sprintf(grayCaddyfile, r.URL(), "", testcaddy.FreePort(t)))
	for _, p := range []*testcaddy.Process{a, b} {
		testcaddy.Eventually(t, 10*time.Second, "connected to redis", func() bool {
			out, _, ok := sluice(t, p, "store")
			return ok && strings.Contains(out, `"connected": true`)
		})
	}
	// The write says where the rule is not declared (exit 2).
	if out, errOut, code := sluiceCode(t, a, "rules", "patch", "gray", "canary_cli", "weight=10"); code != 2 ||
		!strings.Contains(errOut, "do not declare the rule") {
		t.Fatalf("patch of a rule declared on one instance of two: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := sluiceCode(t, a, "verdicts", "gray", "canary_cli", "--wait", "60s")
	if code != 2 || strings.Count(out, "accepted") != 1 || strings.Count(out, "unused") != 1 ||
		!strings.Contains(out, "(not used here: this instance does not declare the rule)") ||
		!strings.Contains(errOut, "is not used by live instance(s)") || strings.Contains(out, "rejected") {
		t.Fatalf("verdicts on a rule declared on one instance of two: exit %d\n%s%s", code, out, errOut)
	}
	if out := mustSluice(t, b, "invalid"); strings.Contains(out, "canary_cli") {
		t.Fatalf("the instance that does not declare the rule lists it as invalid:\n%s", out)
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
		t.Fatalf("no sluice_rules_invalid series on the instance that does not declare the rule: %v", m)
	}

	// A bad value is still rejected everywhere.
	redistest.Push(t, r.Client(), "gray:rule:canary_cli", "gateway:rules:gray", "canary_cli", "weight", "150")
	testcaddy.Eventually(t, 30*time.Second, "a bad value is rejected by both", func() bool {
		out, _, _ := sluice(t, a, "verdicts", "gray", "canary_cli")
		return strings.Count(out, "rejected") == 2
	})

	// Undo: verifies where declared, unused elsewhere.
	mustSluice(t, a, "rules", "delete", "gray", "canary_cli")
	out, errOut, code = sluiceCode(t, a, "verdicts", "gray", "canary_cli", "--wait", "60s")
	if code != 2 || strings.Count(out, "deleted") != 2 || strings.Count(out, "(not used here: this instance does not declare the rule)") != 1 {
		t.Fatalf("verdicts after the undo: exit %d\n%s%s", code, out, errOut)
	}
}

// sluiceCode is sluice with the exit status.
func sluiceCode(t *testing.T, p *testcaddy.Process, args ...string) (string, string, int) {
	t.Helper()
	args = append([]string{"sluice"}, args...)
	args = append(args, "--address", fmt.Sprintf("localhost:%d", p.AdminPort))
	cmd := exec.Command(testcaddy.Binary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}
