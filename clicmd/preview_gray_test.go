package clicmd_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/replay"
)

const grayPreviewCaddyfile = `{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
	}
}
http://127.0.0.1:%d {
	grayroute gv
	respond "{http.grayroute.version}"
}`

// A gray rule's preview asks every live instance through Redis too: two
// instances each replay the split they made, and the sum gives each
// version's requests as the clients were served them, and a raised
// weight moves requests to the target only.
func TestPreviewOfGrayWeightsSumsTwoInstances(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	redistest.Push(t, c, "gray:rule:gv", "gateway:rules:gray", "gv", "target_version", "v2", "weight", "10",
		"hash_key", "{http.request.header.X-User}")
	ports, ps := startPreviewFleet(t, rd, grayPreviewCaddyfile, "gray", "gv")
	const users, each = 300, 2
	served := map[string]int64{}
	for i, port := range ports {
		for u := range users {
			for range each {
				served[grayGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port), fmt.Sprintf("u%d-%d", i, u))]++
			}
		}
	}
	if served["v2"] == 0 || served["v1"]+served["v2"] != 2*users*each {
		t.Fatalf("served %v: the traffic does not test the split", served)
	}

	var res struct {
		Impact *replay.Impact `json:"impact"`
	}
	raw := mustSluice(t, ps[0], "preview", "gray", "gv", "weight", "50", "--json")
	if err := json.Unmarshal([]byte(raw), &res); err != nil || res.Impact == nil {
		t.Fatalf("--json: %v\n%s", err, raw)
	}
	imp := res.Impact
	t.Logf("weight 10 → 50 on two instances: %+v", *imp)
	if imp.Instances != (replay.Instances{Asked: 2, Answered: 2}) || imp.Requests != 2*users*each || len(imp.Versions) != 2 {
		t.Fatalf("impact %+v; want 2 of 2 instances, %d requests, two versions", *imp, 2*users*each)
	}
	v1, v2 := imp.Versions[0], imp.Versions[1]
	if v1.Version != "v1" || v2.Version != "v2" || v1.RequestsNow != served["v1"] || v2.RequestsNow != served["v2"] ||
		v2.RequestsMoved == 0 || v1.RequestsMoved != 0 || v2.KeysNow+v1.KeysNow != 2*users || v2.RequestsProposed != v2.RequestsNow+v2.RequestsMoved {
		t.Errorf("versions %+v; the clients were served %v", imp.Versions, served)
	}
	out := mustSluice(t, ps[1], "preview", "gray", "gv", "weight", "50")
	if !strings.Contains(out, "2 of 2 instances answered") || !strings.Contains(out, "versions          share now") {
		t.Errorf("preview output:\n%s", out)
	}
}

// grayGet returns the version a request of user u was served.
func grayGet(t *testing.T, url, u string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User", u)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}
