package circuitbreaker_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// The open response's header field is still read under its old name
// header, and the log says to use headers instead.
func TestHeaderFieldStillReadWithAWarning(t *testing.T) {
	u := newUpstream(t)
	logPath := filepath.Join(t.TempDir(), "caddy.log")
	url, _ := site(t, fmt.Sprintf(`
	log {
		output file %s
		format json
	}
	rulestore {
		circuit_breaker old_header {
			failure_threshold 1
			open_duration     1h
			header            "X-Fallback yes"
		}
	}`, logPath), fmt.Sprintf(`
	circuitbreaker old_header
	reverse_proxy %s`, u.hostPort()))
	trip(t, url, 1)
	if got := expectOpen(t, u, url).Get("X-Fallback"); got != "yes" {
		t.Errorf("open response X-Fallback %q, want yes from the header field", got)
	}
	if warnings(t, logPath, "old_header") != 1 {
		t.Errorf("want one deprecation warning for the header field of old_header in the log")
	}
}

// A rule pushed to Redis with the old header field is read and warned
// about once: the same fields published again, or re-read by a resync, do
// not warn again.
func TestHeaderFieldFromRedisWarnsOnce(t *testing.T) {
	r := redistest.Start(t)
	redistest.Push(t, r.Client(), "circuit_breaker:rule:pushed_header", "gateway:rules:circuit_breaker", "pushed_header",
		"state", "force_open", "header", "X-From-Redis yes")
	u := newUpstream(t)
	logPath := filepath.Join(t.TempDir(), "caddy.log")
	port, admin := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	storage file_system %s
	log {
		output file %s
		format json
	}
	rulestore {
		redis  %s
		resync 1s
	}
}
http://127.0.0.1:%d {
	circuitbreaker pushed_header
	reverse_proxy %s
}
`, admin, t.TempDir(), logPath, r.URL(), port, u.hostPort()))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	testcaddy.Eventually(t, 10*time.Second, "the Redis rule's open response with its header", func() bool {
		code, hdr, _ := get(t, url)
		return code == 503 && hdr.Get("X-From-Redis") == "yes"
	})
	resyncs := func() int64 {
		resp, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/store", admin))
		var st struct {
			Resyncs int64 `json:"resyncs"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET /sluice/store: %d %s", resp.StatusCode, body)
		}
		return st.Resyncs
	}
	// The same fields published again, then resyncs: no new warning.
	redistest.Push(t, r.Client(), "circuit_breaker:rule:pushed_header", "gateway:rules:circuit_breaker", "pushed_header",
		"state", "force_open", "header", "X-From-Redis yes")
	first := resyncs()
	testcaddy.Eventually(t, 20*time.Second, "two more resyncs", func() bool { return resyncs() >= first+2 })
	if n := warnings(t, logPath, "pushed_header"); n != 1 {
		t.Errorf("%d deprecation warnings for pushed_header after a re-publish and resyncs, want 1", n)
	}
}

// warnings counts the log's deprecation warnings for rule's header field.
func warnings(t *testing.T, logPath, rule string) int {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"msg":"deprecated rule field: use headers instead"`) &&
			strings.Contains(line, `"rule":"`+rule+`"`) && strings.Contains(line, `"field":"header"`) {
			n++
		}
	}
	return n
}
