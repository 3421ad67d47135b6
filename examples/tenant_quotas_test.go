package examples_test

import (
	"net/http"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// served sends n requests as team of org and counts how many were served
// at the normal priority and how many demoted to sheddable; every one must
// be served.
func served(t *testing.T, url, org, team string, n int) (normal, demoted int) {
	t.Helper()
	for i := 0; i < n; i++ {
		resp, body := testcaddy.Get(t, url, "X-Org: "+org, "X-Team: "+team)
		switch {
		case resp.StatusCode != http.StatusOK:
			t.Fatalf("team %s, request %d: %d %q, want 200 (demoted, not refused)", team, i+1, resp.StatusCode, body)
		case body == team+": normal":
			normal++
		case body == team+": sheddable":
			demoted++
		default:
			t.Fatalf("team %s, request %d: %q", team, i+1, body)
		}
	}
	return normal, demoted
}

// TestTenantQuotas: examples/tenant-quotas as its README shows. Team a
// alone borrows b's unused half: 20 (its 10 guaranteed and 10 borrowed)
// at the normal class, the rest demoted; then team b, though the org has
// nothing unused, gets its guarantee of 10. The buckets refill at 10 a
// second (a guarantee at 5) while the test runs: a few more may pass.
// Then rules.sh: over the share is refused.
func TestTenantQuotas(t *testing.T) {
	s := startScenario(t, "tenant-quotas")
	normal, demoted := served(t, s.gateway+"/", "acme", "a", 30)
	if normal < 20 || normal > 24 || demoted != 30-normal {
		t.Fatalf("team a alone: %d normal, %d demoted; want 20 to 24 normal (its guarantee and what b left unused), the rest demoted", normal, demoted)
	}
	normal, demoted = served(t, s.gateway+"/", "acme", "b", 16)
	if normal < 10 || normal > 13 || demoted != 16-normal {
		t.Fatalf("team b after a: %d normal, %d demoted; want 10 to 13 normal (its guarantee), the rest demoted", normal, demoted)
	}
	// Another organisation's teams have their own budget.
	if normal, _ := served(t, s.gateway+"/", "globex", "a", 5); normal != 5 {
		t.Fatalf("globex's team a: %d of 5 normal, want all", normal)
	}

	s.rulesSh(t)
	s.waitRule(t, "rate_limit/team", `"over_limit":"refuse"`)
	// Team a of acme spent its guarantee and the org's pool: 429 now (as
	// many requests as the buckets refilled meanwhile pass first).
	untilStatus(t, s.gateway+"/", http.StatusTooManyRequests, 30, "X-Org: acme", "X-Team: a")
}

// untilStatus sends requests until one is answered status (at most max),
// failing on any answer but 200 and status.
func untilStatus(t *testing.T, url string, status, max int, headers ...string) {
	t.Helper()
	for i := 0; i < max; i++ {
		resp, body := testcaddy.Get(t, url, headers...)
		switch resp.StatusCode {
		case status:
			return
		case http.StatusOK:
		default:
			t.Fatalf("request %d: %d %q", i+1, resp.StatusCode, body)
		}
	}
	t.Fatalf("%d requests, none answered %d", max, status)
}
