package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
	"github.com/sluicegw/sluice/rulestore"
)

// costCase is one request and what the user sees: status and, when
// admitted, X-RateLimit-Remaining.
type costCase struct {
	header string // X-Batch-Size, "" for none
	status int
	left   string
}

func checkCosts(t *testing.T, url string, cases []costCase) {
	t.Helper()
	for i, c := range cases {
		var hdr []string
		if c.header != "" {
			hdr = append(hdr, "X-Batch-Size: "+c.header)
		}
		resp, body := testcaddy.Get(t, url, hdr...)
		if resp.StatusCode != c.status {
			t.Fatalf("request %d (X-Batch-Size %q): status %d %q, want %d", i+1, c.header, resp.StatusCode, body, c.status)
		}
		if c.left != "" {
			if got := resp.Header.Get("X-RateLimit-Remaining"); got != c.left {
				t.Fatalf("request %d (X-Batch-Size %q): remaining %q, want %s", i+1, c.header, got, c.left)
			}
		}
		if c.status == http.StatusBadRequest && !strings.HasPrefix(body, `{"error":"bad_cost","rule":"`) {
			t.Fatalf("request %d: body %q, want a bad_cost error", i+1, body)
		}
	}
}

// A batch spends what its header says; a cost that is missing, not a
// whole number, negative or above max_cost is refused 400 and spends
// nothing.
var batchCases = []costCase{
	{"4", 200, "6"},
	{"", 400, ""},
	{"abc", 400, ""},
	{"-1", 400, ""},
	{"2.5", 400, ""},
	{"6", 400, ""}, // above max_cost 5
	{"5", 200, "1"},
	{"2", 429, ""},
	{"0", 200, "1"},
	{"1", 200, "0"},
}

const costSite = `
	ratelimit {
		qps 0.01
		burst 10
		key_resolver global
		cost {http.request.header.X-Batch-Size}
		max_cost 5
		%s
	}
	respond "ok"`

func TestCostFromHeaderInCaddy(t *testing.T) {
	s := caddyfile(t, "", fmt.Sprintf(costSite, ""))
	testcaddy.Run(t, s.cfg)
	checkCosts(t, s.urls[0], batchCases)
}

// A cost from any placeholder (here a query parameter, read through the
// replacer), in a JSON config with a number cost beside it.
func TestCostFromPlaceholderInJSON(t *testing.T) {
	port, fixed := testcaddy.FreePort(t), testcaddy.FreePort(t)
	cfg := fmt.Sprintf(`{"admin":{"disabled":true},"apps":{"http":{"servers":{"a":{"listen":["127.0.0.1:%d"],"routes":[{"handle":[
		{"handler":"ratelimit","inline":{"qps":0.01,"burst":10,"key_resolver":"global","cost":"{http.request.uri.query.n}","max_cost":5}},
		{"handler":"static_response","body":"ok"}]}]},
		"b":{"listen":["127.0.0.1:%d"],"routes":[{"handle":[
		{"handler":"ratelimit","inline":{"qps":0.01,"burst":10,"key_resolver":"global","cost":3}},
		{"handler":"static_response","body":"ok"}]}]}}}}}`, port, fixed)
	testcaddy.RunJSON(t, []byte(cfg))
	base := fmt.Sprintf("http://127.0.0.1:%d/?n=", port)
	for i, c := range []struct {
		n      string
		status int
	}{{"4", 200}, {"x", 400}, {"6", 400}, {"5", 200}, {"2", 429}, {"1", 200}} {
		if got := status(t, base+c.n); got != c.status {
			t.Fatalf("request %d n=%s: %d, want %d", i+1, c.n, got, c.status)
		}
	}
	// cost 3 from a full bucket of 10: three pass, the fourth is refused.
	expect(t, fmt.Sprintf("http://127.0.0.1:%d/", fixed), []int{200, 200, 200, 429})
}

// The same cost with scope cluster, the rule from a Redis hash: the key's
// tokens in Redis fall by each request's cost.
func TestCostClusterRuleFromRedis(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	redistest.Push(t, c, "rate_limit:rule:batch", "gateway:rules:rate_limit", "batch",
		"qps", "0.01", "burst", "10", "key_resolver", "global", "scope", "cluster", "redis_timeout", "500ms",
		"cost", "{http.request.header.X-Batch-Size}", "max_cost", "5")
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}", "\tratelimit batch\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	testcaddy.Eventually(t, 10*time.Second, "rule batch loaded", func() bool {
		resp, _ := testcaddy.Get(t, s.urls[0], "X-Batch-Size: 0") // spends nothing
		return resp.Header.Get("X-RateLimit-Limit") == "10"
	})
	checkCosts(t, s.urls[0], batchCases)
	if n := c.Exists(context.Background(), "ratelimit:tb2:{batch:global}").Val(); n != 1 {
		t.Fatal("the key's bucket is not in redis")
	}
}

func TestCostFieldErrors(t *testing.T) {
	base := rulestore.Fields{"qps": "1", "burst": "10"}
	for _, c := range []struct {
		fields rulestore.Fields
		field  string
		want   string
	}{
		{rulestore.Fields{"cost": "3", "requested_tokens": "3"}, "cost", "not both"},
		{rulestore.Fields{"cost": "abc"}, "cost", "placeholder"},
		{rulestore.Fields{"cost": "11"}, "cost", "exceeds burst"},
		{rulestore.Fields{"max_cost": "3"}, "max_cost", "or response_cost, only"},
		{rulestore.Fields{"cost": "{http.request.header.N}", "max_cost": "11"}, "max_cost", "exceeds the quota 10"},
		{rulestore.Fields{"cost": "{http.request.header.N}", "overrides": "user:1=1/4", "max_cost": "5"}, "max_cost", "exceeds the quota 4"},
		{rulestore.Fields{"cost": "{http.request.header.N}", "control_behavior": "pace", "burst": "-"}, "cost", "control_behavior reject only"},
		{rulestore.Fields{"cost": "{http.request.header.N}", "scope": "cluster", "lease_size": "2", "max_cost": "5"}, "lease_size", "less than max_cost"},
	} {
		f := rulestore.Fields{}
		for k, v := range base {
			f[k] = v
		}
		for k, v := range c.fields {
			f[k] = v
			if v == "-" {
				delete(f, k)
			}
		}
		_, err := ratelimit.ParseRule("r", f)
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %s with %q", c.fields, err, c.field, c.want)
		}
	}
	r, err := ratelimit.ParseRule("r", rulestore.Fields{"qps": "1", "burst": "10", "cost": "{http.request.header.N}", "overrides": "user:1=1/4"})
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxCost != 4 {
		t.Errorf("max_cost %d, want the smallest quota, 4", r.MaxCost)
	}
}
