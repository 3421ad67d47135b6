package monitoring_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// accessLogLines are the Caddyfile lines docs/operations.md shows (in
// the section "Decisions in access logs").
const accessLogLines = `log {
		output file %s
		format json
	}
	log_append ratelimit_rule {http.ratelimit.rule}
	log_append ratelimit_result {http.ratelimit.result}
	log_append ratelimit_remaining {http.ratelimit.remaining}
	log_append breaker_rule {http.circuitbreaker.rule}
	log_append breaker_state {http.circuitbreaker.state}
	log_append gray_rule {http.grayroute.rule}
	log_append gray_version {http.grayroute.version}`

// TestDecisionsInAccessLog reads the access log file a real Caddy writes:
// each request's line carries the decisions of the handlers it met.
func TestDecisionsInAccessLog(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "access.log")
	s := startCaddy(t, fmt.Sprintf(accessLogLines, logFile))
	doc := readFile(t, "../../docs/operations.md")
	for _, line := range strings.Split(fmt.Sprintf(accessLogLines, "/var/log/caddy/access.log"), "\n") {
		if !strings.Contains(doc, strings.TrimSpace(line)) {
			t.Errorf("docs/operations.md does not show %q", strings.TrimSpace(line))
		}
	}

	send := []struct{ path, user string }{
		{"/tight", "a"}, {"/tight", "a"}, // allowed, then rate limited
		{"/flaky", ""}, {"/flaky", ""}, {"/flaky", ""}, // two failures open the breaker
		{"/canary", "alice"},
	}
	var gray string
	for _, q := range send {
		_, body := testcaddy.Get(t, s.gateway+q.path+"?u="+q.user, "X-User-Id: "+q.user)
		if q.path == "/canary" {
			gray = body
		}
	}
	type entry struct {
		Request struct {
			URI string `json:"uri"`
		} `json:"request"`
		Status             int    `json:"status"`
		RatelimitRule      string `json:"ratelimit_rule"`
		RatelimitResult    string `json:"ratelimit_result"`
		RatelimitRemaining any    `json:"ratelimit_remaining"`
		BreakerRule        string `json:"breaker_rule"`
		BreakerState       string `json:"breaker_state"`
		GrayRule           string `json:"gray_rule"`
		GrayVersion        string `json:"gray_version"`
	}
	var lines []entry
	testcaddy.Eventually(t, 10*time.Second, "an access log line per request", func() bool {
		f, err := os.Open(logFile)
		if err != nil {
			return false
		}
		defer f.Close()
		lines = lines[:0]
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("access log line %q: %v", sc.Text(), err)
			}
			lines = append(lines, e)
		}
		return len(lines) == len(send)
	})
	want := []entry{
		{Status: 200, RatelimitRule: "tight", RatelimitResult: "allowed", RatelimitRemaining: float64(0)},
		{Status: 429, RatelimitRule: "tight", RatelimitResult: "rate_limited", RatelimitRemaining: float64(0)},
		{Status: 500, RatelimitRemaining: ""},
		{Status: 500, RatelimitRemaining: ""},
		{Status: 503, BreakerRule: "flaky_cb", BreakerState: "open", RatelimitRemaining: ""},
		{Status: 200, GrayRule: "checkout", GrayVersion: gray, RatelimitRemaining: ""},
	}
	for i, w := range want {
		got := lines[i]
		w.Request = got.Request
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("access log line %d (%s):\n got %+v\nwant %+v", i+1, send[i].path, got, w)
		}
	}
	if gray != "v1" && gray != "v2" {
		t.Errorf("canary answered %q", gray)
	}
}
