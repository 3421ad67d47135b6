package ratelimit_test

import (
	"fmt"
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

// An inline rule with an id takes its new fields on a reload: the policy
// and the quota are the new block's, and the state stays the id's.
func TestInlineRuleWithIDReloads(t *testing.T) {
	site := `
	ratelimit {
		id           inl_a
		qps          0.01
		burst        %d
		key_resolver global
	}
	respond "ok"`
	s := caddyfile(t, "", fmt.Sprintf(site, 2))
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 200, 429})
	reloaded := caddyfile(t, "", fmt.Sprintf(site, 20))
	cfg := strings.Replace(reloaded.cfg, reloaded.urls[0][len("http://"):], s.urls[0][len("http://"):], 1)
	cfg = strings.Replace(cfg, fmt.Sprintf("localhost:%d", reloaded.adminPort), fmt.Sprintf("localhost:%d", s.adminPort), 1)
	testcaddy.Reload(t, cfg)
	// The tokens spent stay spent (the state is the id's): the refusal
	// names the new quota.
	resp, _ := testcaddy.Get(t, s.urls[0])
	if pol, limit := resp.Header.Get("RateLimit-Policy"), resp.Header.Get("X-RateLimit-Limit"); pol != `"inl_a";q=20;w=2000` || limit != "20" {
		t.Fatalf("after the reload with burst 20: RateLimit-Policy %q, X-RateLimit-Limit %q; want \"inl_a\";q=20;w=2000 and 20", pol, limit)
	}
}

// Two inline blocks giving one id with different fields are one rule with
// two sets of numbers: the config is refused, naming the id.
func TestInlineRuleIDWithTwoBodiesIsAnError(t *testing.T) {
	block := "\tratelimit {\n\t\tid shared_a\n\t\tqps 1\n\t\tburst %d\n\t\tkey_resolver global\n\t}\n\trespond \"ok\""
	s := caddyfile(t, "", fmt.Sprintf(block, 2), fmt.Sprintf(block, 5))
	err := testcaddy.Validate(s.cfg)
	if err == nil || !strings.Contains(err.Error(), `give id "shared_a" with different fields`) {
		t.Fatalf("validate: %v, want an error naming id shared_a", err)
	}
}
