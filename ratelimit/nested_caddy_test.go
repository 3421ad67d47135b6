package ratelimit_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// orgTree is an org of 10 with two teams, each guaranteed half of it and
// allowed all of it: buckets that do not refill during a test (a token in
// 11.6 days; the quota API's thousandths do not move either).
const orgTree = `	rulestore {
		rate_limit org {
			qps 0.000001
			burst 10
			key_resolver {http.request.header.X-Org}
		}
		rate_limit team {
			qps 0.000001
			burst 10
			key_resolver {http.request.header.X-Org}/{http.request.header.X-Team}
			parent org
			parent_key {http.request.header.X-Org}
			guarantee 50%
		}
	}`

// A team that borrowed the whole org's pool leaves its sibling its
// guarantee: team a takes its 5 guaranteed and the 5 unused, then its own
// ceiling refuses it; team b still gets its 5 (the org goes into debt for
// them, as HTB's), then borrows nothing more, since the org has nothing
// unused; another org's teams are untouched.
func TestNestedGuaranteeHoldsAfterASiblingBorrowed(t *testing.T) {
	s := caddyfile(t, orgTree, "\tratelimit team\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	a := []string{"X-Org: acme", "X-Team: a"}
	b := []string{"X-Org: acme", "X-Team: b"}
	expect(t, s.urls[0], []int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429}, a...)
	// X-RateLimit-Remaining is what the tree lends the key: b's
	// guarantee, though its own ceiling holds 10 and the org nothing.
	for i, want := range []string{"4", "3", "2", "1", "0"} {
		if resp, _ := testcaddy.Get(t, s.urls[0], b...); resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Remaining") != want {
			t.Fatalf("team b, request %d: %d remaining %q, want 200 with %s", i+1, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), want)
		}
	}
	expect(t, s.urls[0], []int{429}, b...)
	expect(t, s.urls[0], []int{429}, a...)
	expect(t, s.urls[0], []int{200, 200}, "X-Org: other", "X-Team: a")
}

// A request without its parent's key is answered as an empty key.
func TestNestedWithoutParentKeyIsAnEmptyKey(t *testing.T) {
	s := caddyfile(t, orgTree, "\tratelimit team\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	resp, body := testcaddy.Get(t, s.urls[0], "X-Team: a")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"empty_key"`) || !strings.Contains(body, `"team"`) {
		t.Fatalf("%d %q, want 403 empty_key for rule team", resp.StatusCode, body)
	}
}

// A tree that cannot hold fails caddy validate, naming the rules and the
// field: guarantees over 100 %, a parent that does not exist, a cycle, a
// sliding window in a tree, a parent without parent_key and no Redis.
func TestNestedTreesThatDoNotHoldFailValidate(t *testing.T) {
	team := func(id, fields string) string {
		return "\t\trate_limit " + id + " {\n\t\t\tqps 10\n\t\t\tkey_resolver {http.request.header.X-Team}\n" + fields + "\t\t}\n"
	}
	org := "\t\trate_limit org {\n\t\t\tqps 100\n\t\t}\n"
	cases := []struct{ rules, want string }{
		{org + team("a", "\t\t\tparent org\n\t\t\tparent_key ip\n\t\t\tguarantee 60%\n") + team("b", "\t\t\tparent org\n\t\t\tparent_key ip\n\t\t\tguarantee 50\n"),
			`the guarantees of org's children add up to 110%, over 100%: rate_limit rule a guarantee 60%, rate_limit rule b guarantee 50%`},
		{team("a", "\t\t\tparent orgg\n\t\t\tparent_key ip\n"), `field parent: no rate_limit rule "orgg"`},
		{team("a", "\t\t\tparent b\n\t\t\tparent_key ip\n") + team("b", "\t\t\tparent a\n\t\t\tparent_key ip\n"), `a → b → a makes a cycle`},
		{"\t\trate_limit org {\n\t\t\tqps 100\n\t\t\tlimit_type sliding_window\n\t\t}\n" + team("a", "\t\t\tparent org\n\t\t\tparent_key ip\n"),
			`rate_limit rule "org", the parent of "a": a nested quota is a token_bucket or a calendar quota, not a sliding_window`},
		{org + team("a", "\t\t\tparent org\n"), `rate_limit rule "a": field parent_key: required without redis`},
		{org + team("a", "\t\t\tparent org\n\t\t\tparent_key ip\n\t\t\tguarantee 101\n"), `guarantee`},
		{org + team("a", "\t\t\tguarantee 10\n"), `applies to a rule with a parent only`},
		{org + team("a", "\t\t\tparent org\n\t\t\tparent_key ip\n\t\t\tmax_concurrent 3\n"), `field max_concurrent="3": does not apply to a rule with a parent`},
		{"\t\trate_limit org {\n\t\t\tqps 100\n\t\t\tscope cluster\n\t\t}\n" + team("a", "\t\t\tparent org\n\t\t\tparent_key ip\n"),
			`rate_limit rule "org", the parent of "a": field scope: cluster, and every level of a tree has its leaf's scope, local`},
	}
	for _, c := range cases {
		s := caddyfile(t, "\trulestore {\n"+c.rules+"\t}", "\tratelimit a\n\trespond \"ok\"")
		err := testcaddy.Validate(s.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rules\n%s: validate says %v, want an error with %q", c.rules, err, c.want)
		}
	}
}

// The quota API shows a key's use at every level of its tree (by request
// values, as the key's parent_key reads them): after team a took its
// guarantee and the org's unused rest, and b one of its guarantee, the org
// is in debt by b's one; /sluice/quota sends a rule with a parent there.
func TestNestedQuotaTreeShowsEveryLevel(t *testing.T) {
	s := caddyfile(t, orgTree, "\tratelimit team\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200}, "X-Org: acme", "X-Team: a")
	expect(t, s.urls[0], []int{200}, "X-Org: acme", "X-Team: b")
	admin := fmt.Sprintf("http://localhost:%d", s.adminPort)
	resp, body := testcaddy.Get(t, admin+"/sluice/quota_tree/team?header.X-Org=acme&header.X-Team=b")
	want := `{"rule":"team","levels":[` +
		`{"rule":"team","key":"key0:acme/b","ceiling":10,"used":1,"remaining":9,"guarantee_percent":50,"guarantee_left":4,"guaranteed_used":0,"tracked":true},` +
		`{"rule":"org","key":"key0:acme","ceiling":10,"used":11,"remaining":0,"guarantee_percent":0,"guarantee_left":0,"guaranteed_used":0,"tracked":true}]}`
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != want {
		t.Fatalf("quota_tree: %d\n%s\nwant\n%s", resp.StatusCode, body, want)
	}
	resp, body = testcaddy.Get(t, admin+"/sluice/quota/team/key0:acme%2Fb")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "GET /sluice/quota_tree/team/... shows its use at every level") {
		t.Fatalf("quota: %d %q, want 400 pointing at quota_tree", resp.StatusCode, body)
	}
}

// The fields in JSON: guarantee as a number or a string, and the same
// check of a parent's guarantees (when a ratelimit handler loads).
func TestNestedFieldsInJSON(t *testing.T) {
	cfg := func(ga, gb string) []byte {
		return []byte(`{"admin": {"disabled": true}, "apps": {
		"http": {"servers": {"s": {"listen": [":0"], "routes": [{"handle": [{"handler": "ratelimit", "rule": "a"}]}]}}},
		"rulestore": {"rate_limit": {
			"org": {"qps": 100},
			"a": {"qps": 10, "key_resolver": "global", "parent": "org", "parent_key": "global", "guarantee": ` + ga + `, "over_limit": "demote"},
			"b": {"qps": 10, "key_resolver": "global", "parent": "org", "parent_key": "global", "guarantee": ` + gb + `}}}}}`)
	}
	if err := testcaddy.ValidateJSON(cfg(`50`, `"50%"`)); err != nil {
		t.Fatalf("50 and 50%%: %v", err)
	}
	err := testcaddy.ValidateJSON(cfg(`50`, `"51"`))
	if err == nil || !strings.Contains(err.Error(), "the guarantees of org's children add up to 101%, over 100%: rate_limit rule a guarantee 50%, rate_limit rule b guarantee 51%") {
		t.Fatalf("50 and 51: %v, want the guarantees over 100 %% named", err)
	}
}
