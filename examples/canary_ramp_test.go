package examples_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestCanaryRampOnCaddyfileRule runs examples/canary-ramp/ramp.sh, without
// TARGET and then with it, on a gray rule declared in the Caddyfile: each
// step must change the weight (and TARGET's target_version) only, the
// rule's match and fallback staying as declared (issue 13, finding 2: the
// whole rule used to be replaced, or the step rejected while the script
// reported success).
func TestCanaryRampOnCaddyfileRule(t *testing.T) {
	rds := redistest.Start(t)
	port := testcaddy.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		redis %s
		gray checkout-canary {
			match_tag        X-Beta
			match_value      yes
			target_version   v2
			fallback_version v1
			weight           0
		}
	}
}
http://127.0.0.1:%d {
	grayroute checkout-canary
	respond "{http.grayroute.version}"
}`, testcaddy.Options(t), rds.URL(), port))

	host, rport, _ := strings.Cut(rds.Addr, ":")
	run := func(steps string) string {
		t.Helper()
		cmd := exec.Command("sh", "canary-ramp/ramp.sh", "checkout-canary", steps)
		cmd.Env = append(os.Environ(), "PAUSE=0", "REDIS_HOST="+host, "REDIS_PORT="+rport)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ramp.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	count := func(header, want string) int {
		n := 0
		for i := range 20 {
			if _, body := testcaddy.Get(t, url, fmt.Sprintf("X-User-Id: u%d", i), header); body == want {
				n++
			}
		}
		return n
	}
	if n := count("X-Beta: yes", "v2"); n != 0 {
		t.Fatalf("weight 0 as declared: %d of 20 beta users on v2", n)
	}

	// A crashed instance left a verdict on an old version; its heartbeat
	// has expired: the script must not wait on it nor call it lagging.
	rds.Client().HSet(context.Background(), "gateway:status:gray:checkout-canary", "gw-gone:99",
		`{"state":"accepted","version":"000000000000","at":"2026-12-01T00:00:00Z","heartbeat":"deadbeefdeadbeef"}`)
	out := run("50 100")
	testcaddy.Eventually(t, 10*time.Second, "weight 100: every beta user on v2", func() bool {
		return count("X-Beta: yes", "v2") == 20
	})
	// The match stayed: users without the tag are all on v1.
	if n := count("X-Other: 1", "v1"); n != 20 {
		t.Fatalf("weight 100 from ramp.sh: %d of 20 users without the tag on v1, want 20\n%s", n, out)
	}
	// The script showed the instance's verdict on each step, on the
	// version it wrote (it computes the version as the store does).
	if c := strings.Count(out, `"state":"accepted"`) - strings.Count(out, "(stopped: not waited on)"); c != 2 ||
		strings.Count(out, "gw-gone:99") != 2 || strings.Count(out, "(stopped: not waited on)") != 2 ||
		strings.Contains(out, "older version") || strings.Contains(out, "not every live instance reported") {
		t.Fatalf("ramp.sh printed %d accepted verdicts for 2 steps, want 2 on the versions written:\n%s", c, out)
	}
	f := rds.Client().HGetAll(context.Background(), "gray:rule:checkout-canary").Val()
	if len(f) != 1 || f["weight"] != "100" {
		t.Fatalf("Redis hash = %v, want only the overlay weight=100", f)
	}

	// A bad step is reported, and the script stops.
	cmd := exec.Command("sh", "canary-ramp/ramp.sh", "checkout-canary", "150 10")
	cmd.Env = append(os.Environ(), "PAUSE=0", "REDIS_HOST="+host, "REDIS_PORT="+rport)
	bad, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(bad), "rejected") || strings.Contains(string(bad), "weight 10%") {
		t.Fatalf("ramp.sh with weight 150: err=%v, want a rejection and a stop:\n%s", err, bad)
	}
	if n := count("X-Beta: yes", "v2"); n != 20 {
		t.Fatalf("after the rejected step: %d of 20 beta users on v2, want the last good rule (weight 100)", n)
	}

	// With TARGET the step overlays target_version too; the match and the
	// fallback stay as declared, so users without the tag stay on v1 (the
	// whole rule used to be replaced and 9 of 20 of them went to the canary).
	cmd = exec.Command("sh", "canary-ramp/ramp.sh", "checkout-canary", "100")
	cmd.Env = append(os.Environ(), "PAUSE=0", "TARGET=v3", "REDIS_HOST="+host, "REDIS_PORT="+rport)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ramp.sh with TARGET: %v\n%s", err, out)
	}
	testcaddy.Eventually(t, 10*time.Second, "TARGET v3: every beta user on v3", func() bool {
		return count("X-Beta: yes", "v3") == 20
	})
	if n := count("X-Other: 1", "v1"); n != 20 {
		t.Fatalf("ramp.sh with TARGET: %d of 20 users without the tag on v1, want 20", n)
	}
	f = rds.Client().HGetAll(context.Background(), "gray:rule:checkout-canary").Val()
	if len(f) != 2 || f["target_version"] != "v3" || f["weight"] != "100" {
		t.Fatalf("Redis hash = %v, want only the overlay target_version=v3 weight=100", f)
	}
}
