package ratelimit_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// An inline rule with an id is named by it (error body, RateLimit-Policy),
// and inline rules of one id share one quota, here across two sites.
func TestInlineRuleExplicitID(t *testing.T) {
	site := `
	ratelimit {
		id           search_api
		qps          0.01
		burst        2
		key_resolver global
	}
	respond "ok"`
	s := caddyfile(t, "", site, site)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200})
	expect(t, s.urls[1], []int{200})
	resp, body := testcaddy.Get(t, s.urls[0])
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request over both sites: %d, want 429 (one quota of 2)", resp.StatusCode)
	}
	if !strings.HasPrefix(body, `{"error":"rate_limited","rule":"search_api",`) {
		t.Errorf("body %q, want the rule named search_api", body)
	}
	if pol := resp.Header.Get("RateLimit-Policy"); pol != `"search_api";q=2;w=200` {
		t.Errorf("RateLimit-Policy %q, want \"search_api\";q=2;w=200", pol)
	}
}

// An inline id that is also a rule of the rulestore block fails at
// provisioning: the two would share one quota while being different rules.
func TestInlineRuleIDClashesWithStatic(t *testing.T) {
	s := caddyfile(t, `	rulestore {
		rate_limit search_api {
			qps 5
		}
	}`, `
	ratelimit {
		id  search_api
		qps 1
	}
	respond "ok"`)
	err := testcaddy.Validate(s.cfg)
	if err == nil || !strings.Contains(err.Error(), `inline rule id "search_api" is also a rate_limit rule of the rulestore block`) {
		t.Fatalf("validate: %v, want the id clash named", err)
	}
}
