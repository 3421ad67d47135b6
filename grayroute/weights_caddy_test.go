package grayroute_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit/replay"
)

// A dry run of a gray rule's weights with ?impact=10m replays the split
// the rule made here: against the weight in force it gives the versions
// the clients were served, and a raised weight moves requests and sticky
// keys to the target only.
func TestDryRunImpactOfGrayWeights(t *testing.T) {
	admin, port := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		gray weights-preview {
			target_version v2
			weight 10
			hash_key {http.request.header.X-User}
		}
	}
}
http://127.0.0.1:%d {
	grayroute weights-preview
	respond "{http.grayroute.version}"
}`, admin, port))
	const users, each = 400, 4
	served := map[string]int64{}
	for u := range users {
		for range each {
			served[get(t, fmt.Sprintf("http://127.0.0.1:%d/", port), fmt.Sprintf("X-User: u%d", u))]++
		}
	}
	if served["v1"]+served["v2"] != users*each || served["v2"] == 0 {
		t.Fatalf("served %v: the traffic does not test the split", served)
	}

	path := "/sluice/rules/gray/weights-preview?dry_run=true&impact=10m"
	imp := testcaddy.DryRunImpact(t, admin, http.MethodPatch, path, `{"weight": "50"}`)
	t.Logf("weight 10 → 50: %+v", *imp)
	if imp.Requests != users*each || imp.Instances != (replay.Instances{Asked: 1, Answered: 1}) || len(imp.Versions) != 2 {
		t.Fatalf("impact %+v", *imp)
	}
	v1, v2 := imp.Versions[0], imp.Versions[1]
	if v1.Version != "v1" || v2.Version != "v2" || v1.RequestsNow != served["v1"] || v2.RequestsNow != served["v2"] {
		t.Errorf("versions %+v; the clients were served %v", imp.Versions, served)
	}
	if v2.RequestsMoved == 0 || v2.RequestsMoved%each != 0 || v2.KeysMoved*each != v2.RequestsMoved || v1.RequestsMoved != 0 ||
		v2.RequestsProposed != v2.RequestsNow+v2.RequestsMoved || v2.KeysNow+v1.KeysNow != users {
		t.Errorf("raised weight: %+v", imp.Versions)
	}
	// 400 users at 50 %: the share is within wide bounds of one half.
	if v2.ShareProposed < 0.35 || v2.ShareProposed > 0.65 || v2.ShareNow > 0.25 {
		t.Errorf("shares now %.3f, proposed %.3f", v2.ShareNow, v2.ShareProposed)
	}

	put := testcaddy.DryRunImpact(t, admin, http.MethodPut, path, `{"target_version": "v2", "weight": "0", "hash_key": "{http.request.header.X-User}"}`)
	t.Logf("weight 0: %+v", *put)
	if len(put.Versions) != 2 || put.Versions[0].RequestsProposed != users*each || put.Versions[0].RequestsMoved != served["v2"] ||
		put.Versions[1].RequestsProposed != 0 {
		t.Errorf("weight 0: %+v", put.Versions)
	}
}
