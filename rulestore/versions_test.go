package rulestore_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// adminWith is adminCall with request headers ("Name: value"); it returns
// the answer's headers too.
func adminWith(t *testing.T, p *testcaddy.Process, method, path, body string, headers ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://localhost:%d%s", p.AdminPort, path), strings.NewReader(body))
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// invalidOf is an instance's list of invalid rule ids, as "problem kind id".
func invalidOf(t *testing.T, p *testcaddy.Process) string {
	t.Helper()
	_, body := adminCall(t, p, "GET", "/sluice/state", "")
	var st struct {
		Rulestore struct {
			Invalid []struct{ Kind, ID, Problem string } `json:"invalid"`
		} `json:"rulestore"`
	}
	json.Unmarshal([]byte(body), &st)
	var out []string
	for _, r := range st.Rulestore.Invalid {
		out = append(out, r.Problem+" "+r.Kind+" "+r.ID)
	}
	return strings.Join(out, ", ")
}

type ruleAnswer struct {
	Version  string            `json:"version"`
	Fields   map[string]string `json:"fields"`
	Rejected *struct {
		Version string            `json:"version"`
		Fields  map[string]string `json:"fields"`
		Field   string            `json:"field"`
		Reason  string            `json:"reason"`
		Since   time.Time         `json:"since"`
	} `json:"rejected"`
}

func getRule(t *testing.T, p *testcaddy.Process, kind, id string) (ruleAnswer, string) {
	t.Helper()
	code, body, h := adminWith(t, p, "GET", "/sluice/rules/"+kind+"/"+id, "")
	if code != 200 {
		t.Fatalf("GET %s %s: %d %s", kind, id, code, body)
	}
	var v ruleAnswer
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v, h.Get("ETag")
}

// One version id per rule state, on two instances: GET's ETag, history,
// verdicts and If-Match agree; a rejected stored value shows beside the
// rule in force, its version is GET's ETag and a write may replace it with
// that ETag; rolling back clears the rejection everywhere and is recorded.
// A rule written through Redis over the size limit is rejected too.
func TestOneVersionIDRejectionAndRollbackAcrossInstances(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	var procs []*testcaddy.Process
	for range 2 {
		procs = append(procs, testcaddy.Start(t, lastGoodCaddyfile(r.URL(), testcaddy.FreePort(t))))
	}
	a, b := procs[0], procs[1]
	const key = "gray:rule:product_canary"

	redistest.Push(t, c, key, "gateway:rules:gray", "product_canary", "weight", "10")
	waitVerdicts(t, c, "gray", key, "product_canary", "accepted", 2)
	v10 := hashVersion(map[string]string{"weight": "10"})
	testcaddy.Eventually(t, 10*time.Second, "history of the raw write", func() bool { return len(historyOf(t, a, "gray", "product_canary")) == 1 })
	h := historyOf(t, a, "gray", "product_canary")
	for i, p := range procs {
		v, etag := getRule(t, p, "gray", "product_canary")
		if v.Version != v10 || etag != `"`+v10+`"` || h[0].Version != v10 || v.Rejected != nil {
			t.Fatalf("instance %d: GET version %s ETag %s, history %s, verdicts on %s; want one id", i, v.Version, etag, h[0].Version, v10)
		}
	}
	// A version read from the history is a valid If-Match.
	if code, body, _ := adminWith(t, a, "PATCH", "/sluice/rules/gray/product_canary", `{"weight": 20}`, `If-Match: "`+h[0].Version+`"`); code != 200 {
		t.Fatalf("PATCH with the history's version as If-Match: %d %s", code, body)
	}
	waitVerdicts(t, c, "gray", key, "product_canary", "accepted", 2)
	v20 := hashVersion(map[string]string{"weight": "20"})

	// A bad raw write: rejected on both, shown by GET beside the rule in force.
	redistest.Push(t, c, key, "gateway:rules:gray", "product_canary", "weight", "150")
	waitVerdicts(t, c, "gray", key, "product_canary", "rejected", 2)
	vBad := hashVersion(map[string]string{"weight": "150"})
	for i, p := range procs {
		v, etag := getRule(t, p, "gray", "product_canary")
		if v.Fields["weight"] != "20" || v.Version != v20 || v.Rejected == nil || v.Rejected.Version != vBad ||
			v.Rejected.Fields["weight"] != "150" || v.Rejected.Field != "weight" || v.Rejected.Since.IsZero() ||
			!strings.Contains(v.Rejected.Reason, "150") || etag != `"`+vBad+`"` {
			t.Fatalf("instance %d: GET of a rejected rule: %+v rejected %+v ETag %s", i, v, v.Rejected, etag)
		}
		if got := invalidOf(t, p); !strings.Contains(got, "rejected gray product_canary") {
			t.Fatalf("instance %d invalid: %q", i, got)
		}
	}
	// A PATCH of another field fails on the stored bad one, and says so.
	code, body, _ := adminWith(t, a, "PATCH", "/sluice/rules/gray/product_canary", `{"fallback_version": "v0"}`, `If-Match: "`+vBad+`"`)
	if code != 400 || !strings.Contains(body, "stored value of field weight") || !strings.Contains(body, vBad) {
		t.Fatalf("PATCH over a stored bad field: %d %s", code, body)
	}

	// Roll back with the ETag GET returned: every instance drops the rejection.
	_, etag := getRule(t, b, "gray", "product_canary")
	if code, body, _ := adminWith(t, b, "POST", "/sluice/rules/gray/product_canary/rollback?version="+v20, "", "If-Match: "+etag); code != 200 {
		t.Fatalf("rollback: %d %s", code, body)
	}
	waitVerdicts(t, c, "gray", key, "product_canary", "accepted", 2)
	for i, p := range procs {
		testcaddy.Eventually(t, 10*time.Second, fmt.Sprintf("instance %d: no invalid gray rule", i), func() bool { return !strings.Contains(invalidOf(t, p), " gray ") })
		if v, etag := getRule(t, p, "gray", "product_canary"); v.Rejected != nil || etag != `"`+v20+`"` {
			t.Fatalf("instance %d after rollback: rejected %+v ETag %s", i, v.Rejected, etag)
		}
		if _, metrics := adminCall(t, p, "GET", "/metrics", ""); !strings.Contains(metrics, "\n"+`sluice_rules_invalid{kind="gray"} 0`+"\n") {
			t.Fatalf("instance %d: sluice_rules_invalid{kind=gray} is not 0 after the rollback:\n%s", i, grepLines(metrics, "sluice_rules_invalid"))
		}
	}
	h = historyOf(t, a, "gray", "product_canary")
	if h[0].Op != "rollback" || h[0].Via != "admin_api" || h[0].Version != v20 || h[0].PrevVersion != vBad {
		t.Fatalf("history after the rollback: newest %+v", h[0])
	}

	// A rule written through Redis over the admin API's 64 KiB limit is
	// rejected; the last good version stays.
	redistest.Push(t, c, "rate_limit:rule:new_api", "gateway:rules:rate_limit", "new_api",
		"limit_type", "token_bucket", "qps", "5", "key_resolver", "global")
	waitVerdicts(t, c, "rate_limit", "rate_limit:rule:new_api", "new_api", "accepted", 2)
	redistest.Push(t, c, "rate_limit:rule:new_api", "gateway:rules:rate_limit", "new_api", "body", strings.Repeat("x", 100<<10))
	waitVerdicts(t, c, "rate_limit", "rate_limit:rule:new_api", "new_api", "rejected", 2)
	v, _ := getRule(t, a, "rate_limit", "new_api")
	if _, hasBody := v.Fields["body"]; hasBody || v.Fields["qps"] != "5" || v.Rejected == nil || !strings.Contains(v.Rejected.Reason, "over the limit of 65536 bytes") || v.Rejected.Fields != nil {
		t.Fatalf("oversized rule through redis: fields %v rejected %+v", v.Fields, v.Rejected)
	}
}
