package grayroute_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestAnalysisWithoutRedis: with no Redis the analysis judges this
// instance's own traffic and writes its verdicts into the rule in memory.
// v2 answers 500 every time: rolled back, then every request goes to v1;
// /sluice/state shows the verdict with its numbers; the admin action
// resumes it and promotes it by hand.
func TestAnalysisWithoutRedis(t *testing.T) {
	addr, url := site(t)
	admin := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		gray c {
			target_version    v2
			fallback_version  v1
			analysis          on
			analysis_interval 200ms
			min_samples       20
			step_weight       50
			failure_threshold 2
		}
	}
}
%s {
	grayroute c
	@v2 vars gray_version v2
	handle @v2 {
		respond "v2 down" 500
	}
	respond "v1"
}
`, admin, addr))
	adminURL := fmt.Sprintf("http://localhost:%d", admin)
	n := 0
	testcaddy.Eventually(t, 60*time.Second, "the rollback", func() bool {
		for i := 0; i < 20; i++ {
			n++
			testcaddy.Get(t, url, fmt.Sprintf("X-User-Id: u%d", n))
		}
		_, body := testcaddy.Get(t, adminURL+"/sluice/rules/gray/c")
		return strings.Contains(body, `"state":"rolled_back"`) && strings.Contains(body, `"source":"memory"`)
	})
	for i := 0; i < 50; i++ {
		if body := get(t, url, fmt.Sprintf("X-User-Id: after%d", i)); body != "v1" {
			t.Fatalf("after the rollback: %q", body)
		}
	}
	_, body := testcaddy.Get(t, adminURL+"/sluice/state")
	var st struct {
		Grayroute struct {
			Analysis []struct {
				State     string `json:"state"`
				Intervals []struct {
					Action       string  `json:"action"`
					Written      bool    `json:"written"`
					Scope        string  `json:"scope"`
					CanaryErrors uint64  `json:"canary_errors"`
					CanaryRate   float64 `json:"canary_error_rate"`
					Reason       string  `json:"reason"`
				} `json:"intervals"`
			} `json:"analysis"`
		} `json:"grayroute"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Grayroute.Analysis) != 1 {
		t.Fatalf("state: %v %s", err, body)
	}
	a := st.Grayroute.Analysis[0]
	last := a.Intervals[len(a.Intervals)-1]
	if a.State != "rolled_back" || last.Action != "rollback" || !last.Written || last.Scope != "local" ||
		last.CanaryRate != 1 || last.CanaryErrors < 20 || !strings.Contains(last.Reason, "error rate") {
		t.Fatalf("last interval %+v (state %s)", last, a.State)
	}

	// By hand: resume (weight stays 0 until promoted), then promote.
	for _, action := range []string{"resume", "promote"} {
		resp, text := testcaddy.Do(t, mustReq(t, "POST", adminURL+"/sluice/canary/c/"+action))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", action, resp.StatusCode, text)
		}
	}
	_, body = testcaddy.Get(t, adminURL+"/sluice/rules/gray/c")
	if !strings.Contains(body, `"state":"promoted"`) || !strings.Contains(body, `"weight":"100"`) {
		t.Fatalf("after promote: %s", body)
	}
	if resp, got := testcaddy.Get(t, url, "X-User-Id: anyone"); resp.StatusCode != 500 || got != "v2 down" {
		t.Fatalf("promoted canary not serving: %d %q", resp.StatusCode, got)
	}
	resp, text := testcaddy.Do(t, mustReq(t, "POST", adminURL+"/sluice/canary/c/explode"))
	if resp.StatusCode != 404 || !strings.Contains(text, "pause, resume, rollback or promote") {
		t.Fatalf("unknown action: %d %s", resp.StatusCode, text)
	}
}

func mustReq(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
