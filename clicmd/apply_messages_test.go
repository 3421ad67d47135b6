package clicmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apply's errors say what is wrong: a complete rule with a bad value is
// not told to be complete, and a binding naming a rule held in Redis that
// --prune would delete is told so, not that the rule is nowhere.
func TestApplyErrorsSayWhatIsWrong(t *testing.T) {
	f := newApplyFixture(t)
	write := func(name, body string) string {
		path := filepath.Join(f.dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bad := write("bad_value.json", `{"rate_limit": {"new_api": {"limit_type": "token_bucket", "qps": 0, "burst": 5, "key_resolver": "ip"}}}`)
	_, errOut, ok := sluice(t, f.p, "apply", "-f", bad, "--dry-run")
	if ok || !strings.Contains(errOut, "qps") || strings.Contains(errOut, "must be complete") {
		t.Fatalf("a complete rule with a bad value: ok=%v\n%s", ok, errOut)
	}

	pruned := write("prune.json", `{"binding": {"checkout": {"rate_limit": "order_api"}}}`)
	_, errOut, ok = sluice(t, f.p, "apply", "-f", pruned, "--prune", "--dry-run")
	if ok || !strings.Contains(errOut, `rate_limit rule "order_api" is held in redis, but --prune deletes it (the set does not list it)`) ||
		strings.Contains(errOut, "neither in the set nor in redis") {
		t.Fatalf("a binding naming a rule --prune deletes: ok=%v\n%s", ok, errOut)
	}
}
