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
)

// Rules from Redis, a team's parent key from the hash the operator keeps,
// gateway:parent:team: teams a and b of org acme (4) each hold their
// guarantee of 2 after a borrowed the rest; a team missing from the hash
// is an empty key. A sibling rule written later whose guarantee takes the
// org's over 100 % (logged, naming the rules and field: the message is
// TestNestedTreesThatDoNotHoldFailValidate's) fails no request: b, its
// guarantee spent, is still refused by the rate, never answered 500.
func TestNestedParentKeyFromRedisAndAnOversubscribedRule(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}", "\tratelimit team\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	ctx := context.Background()
	if err := c.HSet(ctx, "gateway:parent:team", "key0:a", "org:acme", "key0:b", "org:acme").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Push(t, c, "rate_limit:rule:org", "gateway:rules:rate_limit", "org", "qps", "0.0001", "burst", "4", "key_resolver", "global")
	redistest.Push(t, c, "rate_limit:rule:team", "gateway:rules:rate_limit", "team",
		"qps", "0.0001", "burst", "10", "key_resolver", "{http.request.header.X-Team}", "parent", "org", "guarantee", "50")
	testcaddy.Eventually(t, 10*time.Second, "both rules loaded", func() bool {
		return ruleLoaded(t, s.adminPort, "org") && ruleLoaded(t, s.adminPort, "team")
	})
	expect(t, s.urls[0], []int{200, 200, 200, 200, 429}, "X-Team: a")
	expect(t, s.urls[0], []int{200, 200, 429}, "X-Team: b")
	expect(t, s.urls[0], []int{403}, "X-Team: c")

	redistest.Push(t, c, "rate_limit:rule:team2", "gateway:rules:rate_limit", "team2",
		"qps", "1", "key_resolver", "global", "parent", "org", "guarantee", "60")
	testcaddy.Eventually(t, 10*time.Second, "team2 loaded", func() bool { return ruleLoaded(t, s.adminPort, "team2") })
	// The tree's verdict is checked again within a second of a change:
	// ask past it, so a request meets the oversubscribed tree.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if got := status(t, s.urls[0], "X-Team: b"); got != http.StatusTooManyRequests {
			t.Fatalf("team b with the org oversubscribed: status %d, want 429 (its guarantee spent)", got)
		}
		time.Sleep(50 * time.Millisecond) // sleep: paces requests across the check's period
	}

	// The admin API checks a write among the rules in force: team2 back to
	// 50 % is stored; a third team's 1 % more is refused, naming the rules
	// and the field.
	put := func(id, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://localhost:%d/sluice/rules/rate_limit/%s", s.adminPort, id),
			strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, text := testcaddy.Do(t, req)
		return resp.StatusCode, text
	}
	if code, body := put("team2", `{"qps": "1", "key_resolver": "global", "parent": "org", "guarantee": "50"}`); code != http.StatusOK {
		t.Fatalf("PUT team2 at 50 %%: %d %s, want 200", code, body)
	}
	code, body := put("team3", `{"qps": "1", "key_resolver": "global", "parent": "org", "guarantee": "1"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "team3") || !strings.Contains(body, "guarantee") || !strings.Contains(body, "101%") {
		t.Fatalf("PUT team3 at 1 %% over a full org: %d %s, want 400 naming team3, guarantee and 101%%", code, body)
	}
	if n := c.Exists(ctx, "rate_limit:rule:team3").Val(); n != 0 {
		t.Fatalf("the refused rule team3 is in Redis")
	}

	// An apply is checked as a whole: moving 10 % from team to team2 in
	// one set holds; giving team2 20 % more without taking it from team
	// does not.
	apply := func(teamPct, team2Pct string) (int, string) {
		body := `{"rules": {"rate_limit": {` +
			`"team": {"qps": "0.0001", "burst": "10", "key_resolver": "{http.request.header.X-Team}", "parent": "org", "guarantee": "` + teamPct + `"},` +
			`"team2": {"qps": "1", "key_resolver": "global", "parent": "org", "guarantee": "` + team2Pct + `"}}}}`
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://localhost:%d/sluice/apply?dry_run=true", s.adminPort), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, text := testcaddy.Do(t, req)
		return resp.StatusCode, text
	}
	if code, body := apply("40", "60"); code != http.StatusOK {
		t.Fatalf("apply moving 10 %% from team to team2: %d %s, want 200", code, body)
	}
	if code, body := apply("50", "70"); code == http.StatusOK || !strings.Contains(body, "guarantee") || !strings.Contains(body, "120%") {
		t.Fatalf("apply taking org to 120 %%: %d %s, want a failure naming guarantee and 120%%", code, body)
	}
}
