package circuitbreaker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	for _, line := range strings.Split(string(b), "\n") {
		warned = warned || strings.Contains(line, `"msg":"deprecated rule field: use headers instead"`) &&
			strings.Contains(line, `"rule":"old_header"`) && strings.Contains(line, `"field":"header"`)
	}
	if !warned {
		t.Errorf("no deprecation warning for the header field of old_header in the log:\n%s", b)
	}
}
