package ratelimit_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit/replay"
)

// dryRunImpact sends a dry-run write with ?impact=10m to the admin API
// and returns its impact.
func dryRunImpact(t *testing.T, admin int, method, path, body string) *replay.Impact {
	t.Helper()
	return testcaddy.DryRunImpact(t, admin, method, path, body)
}

// A dry run with ?impact=10m replays the rule's recorded traffic (local
// scope, thousands of keys): against itself it reproduces the refusals
// the clients saw within 1 %; tightened it newly refuses requests of
// named keys; loosened it newly allows some. PUT, PATCH and apply answer
// alike.
func TestDryRunImpactReplaysRecordedTraffic(t *testing.T) {
	admin, port := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		rate_limit pv {
			limit_type token_bucket
			qps 2
			burst 3
			key_resolver {http.request.header.X-K}
			raw_keys true
		}
	}
}
http://127.0.0.1:%d {
	ratelimit pv
	respond "ok"
}`, admin, port))
	const requests, keys = 12000, 3000
	refused := testcaddy.KeyedTraffic(t, fmt.Sprintf("http://127.0.0.1:%d/", port), requests, keys, 100, 7)
	if refused == 0 || refused == requests {
		t.Fatalf("%d of %d refused: the traffic does not test the rule", refused, requests)
	}

	path := "/sluice/rules/rate_limit/pv?dry_run=true&impact=10m"
	same := dryRunImpact(t, admin, http.MethodPatch, path, `{"qps": "2"}`)
	t.Logf("against itself: %+v", *same)
	if same.Requests != requests || same.Records != requests || same.RefusedRecorded != int64(refused) {
		t.Fatalf("replayed %d requests (%d records), %d refused as recorded; sent %d, %d refused", same.Requests,
			same.Records, same.RefusedRecorded, requests, refused)
	}
	if diff := same.RefusedNow - int64(refused); diff*100 > int64(refused) || -diff*100 > int64(refused) {
		t.Errorf("the replay of the rule refuses %d, the clients saw %d refused: off by more than 1 %%", same.RefusedNow, refused)
	}
	if same.NewlyRefused != 0 || same.NewlyAllowed != 0 || same.Instances != (replay.Instances{Asked: 1, Answered: 1}) {
		t.Errorf("an unchanged rule: %+v", *same)
	}

	tight := dryRunImpact(t, admin, http.MethodPut, path, `{"limit_type": "token_bucket", "qps": "1", "burst": "1", "key_resolver": "{http.request.header.X-K}", "raw_keys": "true"}`)
	t.Logf("tightened: %+v", *tight)
	if tight.NewlyRefused == 0 || tight.KeysNewlyRefused == 0 || tight.RefusedProposed <= tight.RefusedNow ||
		len(tight.TopKeys) == 0 || !strings.HasPrefix(tight.TopKeys[0].Key, "key0:user:") || tight.TopKeys[0].NewlyRefused == 0 {
		t.Errorf("tightened: %+v", *tight)
	}

	loose := dryRunImpact(t, admin, http.MethodPatch, path, `{"burst": "20"}`)
	t.Logf("loosened: %+v", *loose)
	if loose.NewlyAllowed == 0 || loose.KeysNewlyAllowed == 0 || loose.RefusedProposed >= loose.RefusedNow {
		t.Errorf("loosened: %+v", *loose)
	}

	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://localhost:%d/sluice/apply?dry_run=true&impact=10m", admin),
		strings.NewReader(`{"rules": {"rate_limit": {"pv": {"qps": "1", "burst": "1"}}}}`))
	resp, out := testcaddy.Do(t, req)
	var applied struct {
		Objects []struct {
			ID     string         `json:"id"`
			Impact *replay.Impact `json:"impact"`
		} `json:"objects"`
	}
	if err := json.Unmarshal([]byte(out), &applied); err != nil || resp.StatusCode != http.StatusOK || len(applied.Objects) != 1 ||
		applied.Objects[0].Impact == nil || applied.Objects[0].Impact.NewlyRefused != tight.NewlyRefused {
		t.Errorf("apply dry run: %d %s; want the tightened rule's impact (%d newly refused)", resp.StatusCode, out, tight.NewlyRefused)
	}
}

// An impact window needs a dry run and a window the record keeps:
// anything else is a 400 that says so. A rule that served nothing, or
// records nothing (record false), answers zero counts.
func TestDryRunImpactRefusals(t *testing.T) {
	admin, port := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		rate_limit pv {
			qps 2
			key_resolver ip
		}
		rate_limit quiet {
			qps 1
			key_resolver ip
			record false
		}
		circuit_breaker cb {
			failure_threshold 5
		}
	}
}
http://127.0.0.1:%d {
	ratelimit quiet
	respond "ok"
}`, admin, port))
	for _, c := range []struct{ path, body, says string }{
		{"/sluice/rules/rate_limit/pv?impact=10m", `{"qps": "1"}`, "add dry_run=true"},
		{"/sluice/rules/rate_limit/pv?dry_run=true&impact=ten", `{"qps": "1"}`, "want a duration"},
		{"/sluice/rules/rate_limit/pv?dry_run=true&impact=11m", `{"qps": "1"}`, "want from 1s to 10m0s"},
	} {
		req, _ := http.NewRequest(http.MethodPatch, fmt.Sprintf("http://localhost:%d%s", admin, c.path), strings.NewReader(c.body))
		resp, out := testcaddy.Do(t, req)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, c.says) {
			t.Errorf("PATCH %s: %d %s; want 400 saying %q", c.path, resp.StatusCode, out, c.says)
		}
	}
	// A rule that served nothing here: zero counts, one instance answered.
	imp := dryRunImpact(t, admin, http.MethodPatch, "/sluice/rules/rate_limit/pv?dry_run=true&impact=5m", `{"qps": "1"}`)
	if imp.Requests != 0 || imp.Window != "5m0s" || imp.Instances != (replay.Instances{Asked: 1, Answered: 1}) {
		t.Errorf("no traffic: %+v", *imp)
	}
	// A breaker no handler here uses: zero counts too.
	imp = dryRunImpact(t, admin, http.MethodPatch, "/sluice/rules/circuit_breaker/cb?dry_run=true&impact=10m", `{"failure_threshold": "3"}`)
	if imp.Requests != 0 || imp.Instances != (replay.Instances{Asked: 1, Answered: 1}) {
		t.Errorf("a breaker without traffic: %+v", *imp)
	}
	for range 3 {
		if resp, body := testcaddy.Get(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("quiet: %d %s", resp.StatusCode, body)
		}
	}
	imp = dryRunImpact(t, admin, http.MethodPatch, "/sluice/rules/rate_limit/quiet?dry_run=true&impact=10m", `{"qps": "5"}`)
	if imp.Requests != 0 || len(imp.Approximate) != 1 || imp.Approximate[0] != "not recorded: the rule sets record false" {
		t.Errorf("a rule with record false: %+v", *imp)
	}
}
