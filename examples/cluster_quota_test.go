package examples_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestClusterQuota runs examples/cluster-quota as its README does: two Caddy
// processes on one Redis share one quota of bursts of 10 per API key.
func TestClusterQuota(t *testing.T) {
	raw, err := os.ReadFile("cluster-quota/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	cf := strings.Replace(string(raw), "admin localhost:{$ADMIN_PORT:2019}", "admin localhost:{{admin}}\n\tpersist_config off", 1)
	// The test pins redis_timeout at 500ms (the default; it was 50ms). On a busy 2-core
	// test machine an instance's first script call (a fresh pooled
	// connection, the script's first load) can take longer; the instance
	// then rightly follows on_redis_error local, and each one admits its
	// own 10 (a full run once read 10 + 10). That is the failure mode, not
	// the shared quota this test is about, so the test gives Redis 500ms.
	cf = strings.Replace(cf, "on_redis_error local", "on_redis_error local\n\t\t\tredis_timeout 500ms", 1)
	if !strings.Contains(cf, "redis_timeout 500ms") {
		t.Fatal("cluster-quota/Caddyfile no longer has on_redis_error local: update this test")
	}
	r := redistest.Start(t)
	t.Setenv("SLUICE_REDIS", r.URL())
	var gateways []string
	var admins []string
	for i := 0; i < 2; i++ {
		port := testcaddy.FreePort(t)
		t.Setenv("GATEWAY_PORT", fmt.Sprint(port)) // read when the process starts
		p := testcaddy.Start(t, cf)
		gateways = append(gateways, fmt.Sprintf("http://localhost:%d/", port))
		admins = append(admins, fmt.Sprintf("http://localhost:%d", p.AdminPort))
	}

	// A quick burst spread over both instances: 10 in all get through (one
	// more at most, refilled at 10/s while the burst runs).
	admitted := map[int]int{}
	for i := 0; i < 24; i++ {
		resp, _ := testcaddy.Get(t, gateways[i%2], "X-Api-Key: k1")
		if resp.StatusCode == http.StatusOK {
			admitted[i%2]++
		} else if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	total := admitted[0] + admitted[1]
	if total < 10 || total > 11 || admitted[0] == 0 || admitted[1] == 0 {
		t.Fatalf("admitted %v (total %d), want about 10 shared by both instances", admitted, total)
	}
	// Another key has its own quota.
	if resp, _ := testcaddy.Get(t, gateways[0], "X-Api-Key: k2"); resp.StatusCode != 200 {
		t.Fatalf("k2: %d", resp.StatusCode)
	}

	// rules.sh raises the quota on both instances at once.
	(&scenario{dir: "cluster-quota", redis: r}).rulesSh(t)
	for _, a := range admins {
		testcaddy.Eventually(t, 10*time.Second, "rules.sh in force", func() bool {
			_, body := testcaddy.Get(t, a+"/sluice/rules/rate_limit/partner_api")
			return strings.Contains(body, `"qps":"20"`)
		})
	}
}
