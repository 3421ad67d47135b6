package examples_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// untilRefused sends requests with key until one is refused (at most max)
// and returns how many passed and the refusal.
func untilRefused(t *testing.T, url, key string, max int) (int, *http.Response, string) {
	t.Helper()
	for i := 0; i < max; i++ {
		resp, body := testcaddy.Get(t, url, "X-Api-Key: "+key)
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			return i, resp, body
		default:
			t.Fatalf("key %s, request %d: %d %q", key, i+1, resp.StatusCode, body)
		}
	}
	t.Fatalf("key %s: %d requests passed, none refused", key, max)
	return 0, nil, ""
}

// quotaOf is GET /sluice/quota/{rule}/{key}.
func quotaOf(t *testing.T, admin, rule, key string) (limit, used float64, override bool) {
	t.Helper()
	resp, body := testcaddy.Get(t, admin+"/sluice/quota/"+rule+"/"+key)
	var q struct {
		Limit, Used float64
		Override    bool
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &q) != nil {
		t.Fatalf("quota %s/%s: %d %q", rule, key, resp.StatusCode, body)
	}
	return q.Limit, q.Used, q.Override
}

func toMidnightUTC(now time.Time) float64 {
	next := time.Date(now.UTC().Year(), now.UTC().Month(), now.UTC().Day()+1, 0, 0, 0, 0, time.UTC)
	return next.Sub(now).Seconds()
}

// TestAPIDailyQuota: examples/api-daily-quota as its README shows, a daily
// quota spent, then rules.sh's partner override.
func TestAPIDailyQuota(t *testing.T) {
	s := startScenario(t, "api-daily-quota")

	resp, body := testcaddy.Get(t, s.gateway+"/")
	if resp.StatusCode != 401 || strings.TrimSpace(body) != `{"error":"empty_key","rule":"api_per_second"}` {
		t.Fatalf("no key: %d %q, want 401 empty_key", resp.StatusCode, body)
	}

	// The burst, then the rate: at least the 10 of the burst pass (one
	// more for each 200 ms the requests took), then 429 for a second.
	passed, resp, body := untilRefused(t, s.gateway+"/", "k1", 100)
	if passed < 10 || !strings.Contains(body, `"rule":"api_per_second"`) || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("k1: %d passed, then %q Retry-After %q; want the burst of 10, then api_per_second's refusal for 1 s",
			passed, body, resp.Header.Get("Retry-After"))
	}
	if limit, used, _ := quotaOf(t, s.admin, "api_per_day", "key0:k1"); limit != 1000 || used != float64(passed) {
		t.Fatalf("k1's day: limit %v used %v, want 1000 and the %d that passed", limit, used, passed)
	}
	if got := codes(t, 1, s.gateway+"/", "X-Api-Key: k2"); got != "200" {
		t.Fatalf("k2: %s, want its own quota", got)
	}

	// The day's quota lowered to 5 in Redis: a new key spends 5 (under the
	// burst of 10) and is refused until midnight UTC.
	rdb := s.redis.Client()
	redistest.Push(t, rdb, "rate_limit:rule:api_per_day", "gateway:rules:rate_limit", "api_per_day",
		"quota", "5", "period", "day", "timezone", "UTC", "key_resolver", "{http.request.header.X-Api-Key}", "on_empty_key", "deny 401")
	s.waitRule(t, "rate_limit/api_per_day", `"quota":"5"`)
	before := time.Now()
	passed, resp, body = untilRefused(t, s.gateway+"/", "k3", 20)
	after := time.Now()
	wait, _ := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64)
	if passed != 5 || !strings.Contains(body, `"rule":"api_per_day"`) || wait < toMidnightUTC(after)-1 || wait > toMidnightUTC(before)+1 {
		t.Fatalf("k3 under quota 5: %d passed, then %q Retry-After %v; want 5, then api_per_day's refusal until midnight UTC (%.0f s)",
			passed, body, wait, toMidnightUTC(after))
	}

	s.rulesSh(t)
	s.waitRule(t, "rate_limit/api_per_day", `"quota":"1000"`, `"overrides":"key0:partner=100000"`)
	if limit, _, override := quotaOf(t, s.admin, "api_per_day", "key0:partner"); limit != 100000 || !override {
		t.Fatalf("partner after rules.sh: limit %v override %v, want 100000 by override", limit, override)
	}
	if limit, used, _ := quotaOf(t, s.admin, "api_per_day", "key0:k3"); limit != 1000 || used != 5 {
		t.Fatalf("k3 after rules.sh: limit %v used %v, want 1000 with its 5 still spent", limit, used)
	}
}
