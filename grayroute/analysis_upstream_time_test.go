package grayroute_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// slowBodyUpstream answers after serve (its own time to the response
// header), then holds the body back for a random 0–500 ms: time after the
// upstream's answer that both versions share alike, as a busy gateway's
// stalls and a client reading slowly are.
func slowBodyUpstream(t *testing.T, version string, serve time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timer := time.NewTimer(serve) // the service time being compared
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		hold := time.NewTimer(time.Duration(rand.Int64N(int64(500 * time.Millisecond)))) // the shared noise
		select {
		case <-hold.C:
		case <-r.Context().Done():
			hold.Stop()
			return
		}
		io.WriteString(w, version)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestAnalysisJudgesTheUpstreamsTime: v2 takes 60 ms to answer where v1
// takes 10 ms, and then both hold their bodies back for 0–500 ms alike.
// End to end, v2's p90 is within the tolerance of v1's (the hold swamps
// the difference); the upstream's own time, to its response header, is
// six times longer. The analysis compares the upstream's time: v2 is
// rolled back for latency, never advanced.
func TestAnalysisJudgesTheUpstreamsTime(t *testing.T) {
	addr, url := site(t)
	admin := testcaddy.FreePort(t)
	v1, v2 := slowBodyUpstream(t, "v1", 10*time.Millisecond), slowBodyUpstream(t, "v2", 60*time.Millisecond)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		gray upstream_time {
			target_version     v2
			fallback_version   v1
			weight             30
			analysis           on
			analysis_interval  500ms
			min_samples        30
			latency_percentile 90
			step_weight        20
			max_weight         50
			failure_threshold  2
		}
	}
}
%s {
	grayroute upstream_time
	@v2 vars gray_version v2
	handle @v2 {
		reverse_proxy %s
	}
	reverse_proxy %s
}
`, admin, addr, v2, v1))
	adminURL := fmt.Sprintf("http://localhost:%d", admin)

	// Traffic from 40 clients until the canary ends.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				req.Header.Set("X-User-Id", fmt.Sprintf("u%d-%d", c, i))
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	var rule string
	testcaddy.Eventually(t, 90*time.Second, "a verdict that ends the canary", func() bool {
		_, rule = testcaddy.Get(t, adminURL+"/sluice/rules/gray/upstream_time")
		return strings.Contains(rule, `"state":"rolled_back"`) || strings.Contains(rule, `"state":"promoted"`)
	})
	if !strings.Contains(rule, `"state":"rolled_back"`) {
		t.Fatalf("v2, six times slower to answer, was not rolled back: %s", rule)
	}
	_, body := testcaddy.Get(t, adminURL+"/sluice/state")
	var st struct {
		Grayroute struct {
			Analysis []struct {
				Rule      string `json:"rule"`
				Intervals []struct {
					Action string `json:"action"`
					Reason string `json:"reason"`
				} `json:"intervals"`
			} `json:"analysis"`
		} `json:"grayroute"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/sluice/state: %v %s", err, body)
	}
	rolled := false
	for _, a := range st.Grayroute.Analysis {
		if a.Rule != "upstream_time" {
			continue
		}
		for _, iv := range a.Intervals {
			if iv.Action == "advance" {
				t.Fatalf("advanced: %s", iv.Reason)
			}
			rolled = rolled || iv.Action == "rollback" && strings.Contains(iv.Reason, "canary slower")
		}
	}
	if !rolled {
		t.Fatalf("no rollback for latency in the rule's intervals: %s", body)
	}
}
