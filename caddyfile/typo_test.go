package caddyfile_test

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// Finding 4 of issue 13: `ratelimit { rout r }` was read as an inline rule
// and the error never mentioned route. Every block suggests the nearest
// known name, at the misspelled line.
func TestMisspelledFieldSuggestsNearestName(t *testing.T) {
	site := func(body string) string { return "http://localhost:1 {\n" + body + "\n\trespond ok\n}\n" }
	global := func(body string) string { return "{\n\trulestore {\n" + body + "\n\t}\n}\n" + site("") }
	for _, c := range []struct{ name, caddyfile, want string }{
		{"ratelimit", site("\tratelimit {\n\t\trout r\n\t}"), "unknown field 'rout' in ratelimit: did you mean route?, at Caddyfile:3"},
		{"ratelimit inline field", site("\tratelimit {\n\t\tqps 5\n\t\tbrust 10\n\t}"), "unknown field 'brust' in ratelimit: did you mean burst?, at Caddyfile:4"},
		{"circuitbreaker", site("\tcircuitbreaker {\n\t\trulee cb\n\t}"), "unknown field 'rulee' in circuitbreaker: did you mean rule?, at Caddyfile:3"},
		{"circuitbreaker inline field", site("\tcircuitbreaker {\n\t\topen_duraton 10s\n\t}"), "did you mean open_duration?, at Caddyfile:3"},
		{"grayroute", site("\tgrayroute {\n\t\trule g\n\t\tdefualt_version v1\n\t}"), "unknown field 'defualt_version' in grayroute: did you mean default_version?, at Caddyfile:4"},
		{"grayroute inline rule field", site("\tgrayroute {\n\t\tgray g {\n\t\t\ttarget_verison v2\n\t\t}\n\t}"), "did you mean target_version?, at Caddyfile:4"},
		{"rulestore option", global("\t\tresyn 3s"), "unknown field 'resyn' in rulestore: did you mean resync?, at Caddyfile:3"},
		{"rulestore redis option", global("\t\tredis {\n\t\t\turl redis://127.0.0.1:1\n\t\t\tread_timout 1s\n\t\t}"), "unknown field 'read_timout' in rulestore redis: did you mean read_timeout?, at Caddyfile:5"},
		{"rulestore rule field", global("\t\trate_limit a {\n\t\t\tqsp 10\n\t\t}"), "did you mean qps?, at Caddyfile:4"},
		{"binding field", global("\t\tbinding r {\n\t\t\tratelimit a\n\t\t}"), "did you mean rate_limit?, at Caddyfile:4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := testcaddy.Validate(c.caddyfile)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

// Rules from Redis or the admin API go through the same parsers, so a
// misspelled field written with redis-cli gets the suggestion too.
func TestMisspelledRuleFieldFromRedisSuggests(t *testing.T) {
	for _, c := range []struct {
		kind rulestore.Kind
		f    rulestore.Fields
		want string
	}{
		{rulestore.RateLimit, rulestore.Fields{"qps": "5", "brust": "10"}, "did you mean burst?"},
		{rulestore.CircuitBreaker, rulestore.Fields{"failure_treshold": "5"}, "did you mean failure_threshold?"},
		{rulestore.Gray, rulestore.Fields{"target_version": "v2", "wieght": "5"}, "did you mean weight?"},
		{rulestore.Binding, rulestore.Fields{"circuitbreaker": "cb"}, "did you mean circuit_breaker?"},
	} {
		_, err := rulestore.Parse(c.kind, "r", c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error containing %q, got %v", c.kind, c.want, err)
		}
	}
}
