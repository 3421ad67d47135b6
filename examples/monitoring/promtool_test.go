package monitoring_test

import (
	"os/exec"
	"strings"
	"testing"
)

// tool returns the path of a program scripts/ensure-prometheus.sh installs.
func tool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs " + name + "; skipped under -short")
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run scripts/ensure-prometheus.sh (make test does)", name)
	}
	return path
}

// TestPromtoolRules checks rules.yml and runs its unit tests
// (rules_test.yml: every alert fires on its fixed series and clears).
func TestPromtoolRules(t *testing.T) {
	promtool := tool(t, "promtool")
	out, err := exec.Command(promtool, "check", "rules", "rules.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command(promtool, "test", "rules", "rules_test.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every alert of rules.yml has a unit test.
	for _, name := range alertNames(t) {
		if !strings.Contains(readFile(t, "rules_test.yml"), "alertname: "+name+"\n") {
			t.Errorf("alert %s has no test in rules_test.yml", name)
		}
	}
}
