package ratelimit_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
)

// TestRawKeysOptIn: the state endpoint and the shadow log mask keys unless
// the rule sets raw_keys.
func TestRawKeysOptIn(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "caddy.log")
	s := caddyfile(t, fmt.Sprintf(`	log {
		output file %s
		format json
	}
	rulestore {
		rate_limit masked {
			qps 0.001
			burst 1
			key_resolver userId
			shadow true
		}
		rate_limit raw {
			qps 0.001
			burst 1
			key_resolver userId
			shadow true
			raw_keys true
		}
	}`, logPath),
		"ratelimit masked\n\trespond ok",
		"ratelimit raw\n\trespond ok")
	testcaddy.Run(t, s.cfg)
	for _, u := range s.urls {
		expect(t, u, []int{200, 200}, "X-User-Id: alice-secret") // the second would be refused
	}
	_, state := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/state", s.adminPort))
	if !strings.Contains(state, `"key":"user:alice-secret"`) {
		t.Errorf("raw_keys rule does not show its raw key: %s", state)
	}
	if !strings.Contains(state, `"key":"`+ratelimit.MaskKey("user:alice-secret")+`"`) {
		t.Errorf("default rule does not show the masked key: %s", state)
	}
	testcaddy.Eventually(t, 5*time.Second, "two shadow log lines", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), "shadow rule would reject") == 2
	})
	b, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "shadow rule would reject") {
			continue
		}
		raw := strings.Contains(line, `"rule":"raw"`)
		if strings.Contains(line, "alice-secret") != raw {
			t.Errorf("shadow log line shows the key wrongly (raw_keys=%v): %s", raw, line)
		}
	}
}
