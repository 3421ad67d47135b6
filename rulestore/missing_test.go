package rulestore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// Finding 3 of issue 13, with Redis: a binding naming a rule that does not
// exist (a typo, or a rule not written yet) let every request pass with one
// warning and nothing else. Through a real handler and Caddy process it is
// now loud: listed as missing in /sluice/state, counted in
// sluice_rules_invalid, warned once (a minute), not per request; and the rule
// is in force the moment it arrives.
func TestMissingRuleThroughHandlerIsLoudUntilItArrives(t *testing.T) {
	r := redistest.Start(t)
	port := testcaddy.FreePort(t)
	p := testcaddy.Start(t, fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
		binding r {
			rate_limit order_apj
		}
	}
}
http://127.0.0.1:%d {
	ratelimit {
		route r
	}
	respond "ok"
}`, r.URL(), port))
	site := fmt.Sprintf("http://127.0.0.1:%d/", port)

	const requests = 50
	for i := range requests {
		if resp, _ := testcaddy.Get(t, site); resp.StatusCode != 200 {
			t.Fatalf("request %d with the rule missing: %d, want 200 (requests pass until it arrives)", i, resp.StatusCode)
		}
	}
	if code, body := adminCall(t, p, "GET", "/sluice/state", ""); code != 200 ||
		!strings.Contains(body, `"kind":"rate_limit","id":"order_apj","problem":"missing"`) || !strings.Contains(body, `"since":"`) {
		t.Fatalf("state does not list order_apj as missing: %d %s", code, body)
	}
	if _, m := adminCall(t, p, "GET", "/metrics", ""); !strings.Contains(m, `sluice_rules_invalid{kind="rate_limit"} 1`) {
		t.Fatalf("want sluice_rules_invalid{kind=\"rate_limit\"} 1 in:\n%s", grepLines(m, "sluice_rules_invalid"))
	}
	if n := strings.Count(p.Logs(), `"rule not found; requests pass through until it arrives"`); n != 1 {
		t.Fatalf("%d 'rule not found' warnings for %d requests, want 1 (at most one a minute per id):\n%s", n, requests, p.Logs())
	}

	// The rule arrives: one token, then refusals; no longer listed.
	redistest.Push(t, r.Client(), "rate_limit:rule:order_apj", "gateway:rules:rate_limit", "order_apj",
		"qps", "0.001", "burst", "1", "key_resolver", "global")
	testcaddy.Eventually(t, 10*time.Second, "order_apj in force (429)", func() bool {
		resp, _ := testcaddy.Get(t, site)
		return resp.StatusCode == 429
	})
	_, body := adminCall(t, p, "GET", "/sluice/state", "")
	if strings.Contains(body, `"id":"order_apj","problem":"missing"`) {
		t.Fatalf("order_apj still listed as missing after it arrived: %s", body)
	}
	if _, m := adminCall(t, p, "GET", "/metrics", ""); !strings.Contains(m, `sluice_rules_invalid{kind="rate_limit"} 0`) {
		t.Fatalf("want sluice_rules_invalid{kind=\"rate_limit\"} 0 in:\n%s", grepLines(m, "sluice_rules_invalid"))
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A rule that is in Redis before Caddy starts is not "missing": the handler
// is provisioned before the store's first load, and that used to log
// "rule not found; requests pass through until it arrives" on every cold
// start, for every rule held in Redis, a false alarm. (A request that comes
// before the first load does pass unchecked, and is warned about.)
func TestRuleInRedisAtStartIsNotWarnedMissing(t *testing.T) {
	r := redistest.Start(t)
	r.Client().HSet(t.Context(), "rate_limit:rule:only_redis", "qps", "0.001", "burst", "1", "key_resolver", "global")
	port := testcaddy.FreePort(t)
	p := testcaddy.Start(t, fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
	}
}
http://127.0.0.1:%d {
	ratelimit only_redis
	respond "ok"
}`, r.URL(), port))
	testcaddy.Eventually(t, 10*time.Second, "only_redis loaded from Redis", func() bool {
		code, _ := adminCall(t, p, "GET", "/sluice/rules/rate_limit/only_redis", "")
		return code == 200
	})
	site := fmt.Sprintf("http://127.0.0.1:%d/", port)
	for i, want := range []int{200, 429} {
		if resp, _ := testcaddy.Get(t, site); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if strings.Contains(p.Logs(), "rule not found") {
		t.Fatalf("a rule held in Redis was warned about as missing:\n%s", p.Logs())
	}
	if _, body := adminCall(t, p, "GET", "/sluice/state", ""); !strings.Contains(body, `"invalid":[]`) {
		t.Fatalf("state lists invalid rules: %s", body)
	}
}
