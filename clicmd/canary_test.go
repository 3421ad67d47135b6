package clicmd_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// `caddy sluice canary rollback` on one instance stops the canary on a
// second one (through the rule in Redis); a missing rule or an unknown
// action is an error.
func TestCLICanaryControl(t *testing.T) {
	r := redistest.Start(t)
	redisLine := "redis " + r.URL()
	a := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, redisLine, testcaddy.FreePort(t)))
	b := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, redisLine, testcaddy.FreePort(t)))
	for _, p := range []*testcaddy.Process{a, b} {
		testcaddy.Eventually(t, 10*time.Second, "connected to redis", func() bool {
			out, _, ok := sluice(t, p, "store")
			return ok && strings.Contains(out, `"connected": true`)
		})
	}
	mustSluice(t, a, "rules", "set", "gray", "checkout", "target_version=v2", "fallback_version=v1",
		"analysis=on", "step_weight=10", "weight=20")
	testcaddy.Eventually(t, 10*time.Second, "the rule on the second instance", func() bool {
		out, _, ok := sluice(t, b, "rules", "get", "gray", "checkout")
		return ok && strings.Contains(out, `"weight": "20"`)
	})

	for _, step := range []struct{ action, state, weight string }{
		{"pause", "paused", "20"}, {"resume", "running", "20"}, {"rollback", "rolled_back", "0"},
	} {
		out := mustSluice(t, a, "canary", step.action, "checkout")
		if !strings.Contains(out, `"state": "`+step.state+`"`) {
			t.Fatalf("canary %s: %s", step.action, out)
		}
		testcaddy.Eventually(t, 10*time.Second, step.action+" on the second instance", func() bool {
			out, _, ok := sluice(t, b, "rules", "get", "gray", "checkout")
			return ok && strings.Contains(out, `"state": "`+step.state+`"`) && strings.Contains(out, `"weight": "`+step.weight+`"`)
		})
	}

	if out, errOut, ok := sluice(t, a, "canary", "pause", "nosuch"); ok || !strings.Contains(out+errOut, `no gray rule "nosuch"`) {
		t.Fatalf("pause of a missing rule: ok=%v %s%s", ok, out, errOut)
	}
	if _, _, ok := sluice(t, a, "canary", "explode", "checkout"); ok {
		t.Fatal("an unknown canary command succeeded")
	}
}
