package circuitbreaker_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit/replay"
)

// A dry run of a breaker's thresholds with ?dry_run=true&impact=10m
// replays the calls it saw here: 20 failures that a threshold of 50 lets
// through would have tripped a threshold of 5, which refuses the calls
// after the trip; against itself the replay refuses nothing.
func TestDryRunImpactOfBreakerThreshold(t *testing.T) {
	admin, port := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		circuit_breaker threshold-preview {
			failure_threshold 50
			open_duration 1m
		}
	}
}
http://127.0.0.1:%d {
	circuitbreaker threshold-preview
	respond "down" 500
}`, admin, port))
	const calls = 20
	for range calls {
		if resp, body := testcaddy.Get(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("call: %d %s; want the upstream's 500 (the breaker in force never trips)", resp.StatusCode, body)
		}
	}
	dry := func(body string) *replay.Impact {
		imp := testcaddy.DryRunImpact(t, admin, http.MethodPatch, "/sluice/rules/circuit_breaker/threshold-preview?dry_run=true&impact=10m", body)
		if imp.Breaker == nil {
			t.Fatalf("PATCH %s: no breaker in %+v", body, *imp)
		}
		return imp
	}
	same := dry(`{"failure_threshold": "50"}`)
	t.Logf("against itself: %+v %+v", *same, *same.Breaker)
	if same.Requests != calls || same.RefusedNow != 0 || same.RefusedProposed != 0 || same.Breaker.TripsNow != 0 || same.Breaker.TripsProposed != 0 {
		t.Errorf("unchanged: %+v %+v", *same, *same.Breaker)
	}
	// Threshold 5: the 5th failure trips, the 15 calls after it are
	// refused for the minute the breaker stays open.
	low := dry(`{"failure_threshold": "5"}`)
	t.Logf("threshold 5: %+v %+v", *low, *low.Breaker)
	if low.Requests != calls || low.Breaker.TripsProposed != 1 || low.Breaker.TripsNow != 0 || low.NewlyRefused != calls-5 ||
		low.RefusedProposed != calls-5 || low.NewlyAllowed != 0 || low.KeysNewlyRefused != 1 || low.Instances != (replay.Instances{Asked: 1, Answered: 1}) {
		t.Errorf("threshold 5: %+v %+v", *low, *low.Breaker)
	}
}
