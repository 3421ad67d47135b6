package clicmd_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

const quotaCaddyfile = `{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		rate_limit cli_quota {
			qps 0.001
			burst 4
			key_resolver userId
		}
	}
}
http://127.0.0.1:%d {
	ratelimit cli_quota
	respond "ok"
}
`

// `caddy sluice quota <rule> <key>` against a running Caddy: one line with
// the numbers the client's RateLimit headers showed, the JSON with --json,
// and an unknown rule is an error naming it, with a suggestion.
func TestCLIQuota(t *testing.T) {
	port := testcaddy.FreePort(t)
	p := testcaddy.Start(t, fmt.Sprintf(quotaCaddyfile, port))
	site := fmt.Sprintf("http://127.0.0.1:%d/", port)
	var left string
	for range 3 {
		resp, body := testcaddy.Get(t, site, "X-User-Id: alice")
		if resp.StatusCode != 200 {
			t.Fatalf("request: %d %s", resp.StatusCode, body)
		}
		left = resp.Header.Get("X-RateLimit-Remaining")
	}
	if left != "1" {
		t.Fatalf("remaining after 3 of 4: %s", left)
	}

	out := mustSluice(t, p, "quota", "cli_quota", "user:alice")
	t.Logf("caddy sluice quota cli_quota user:alice: %s", out)
	for _, want := range []string{"cli_quota user:alice", "token_bucket local", "limit 4", "remaining 1", "debt 0", "from memory"} {
		if !strings.Contains(out, want) {
			t.Fatalf("quota line lacks %q: %s", want, out)
		}
	}
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("quota: want one line, got %q", out)
	}

	var u struct {
		Rule      string  `json:"rule"`
		Key       string  `json:"key"`
		Limit     float64 `json:"limit"`
		Used      float64 `json:"used"`
		Remaining int64   `json:"remaining"`
		Source    string  `json:"source"`
	}
	js := mustSluice(t, p, "quota", "cli_quota", "user:alice", "--json")
	if err := json.Unmarshal([]byte(js), &u); err != nil {
		t.Fatalf("--json: %v: %s", err, js)
	}
	if u.Rule != "cli_quota" || u.Key != "user:alice" || u.Limit != 4 || u.Remaining != 1 || math.Abs(u.Used-3) > 0.01 || u.Source != "memory" {
		t.Fatalf("--json: %+v", u)
	}

	if out := mustSluice(t, p, "quota", "cli_quota", "user:bob"); !strings.Contains(out, "remaining 4") || !strings.Contains(out, "never seen") {
		t.Fatalf("a key never seen: %s", out)
	}
	if out, errOut, ok := sluice(t, p, "quota", "cli_quot", "user:alice"); ok ||
		!strings.Contains(errOut, `no rate_limit rule "cli_quot"`) || !strings.Contains(errOut, "did you mean cli_quota?") {
		t.Fatalf("unknown rule: ok=%v %s%s", ok, out, errOut)
	}
}
