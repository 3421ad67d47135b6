package ratelimit_test

import (
	"context"
	"net/http"
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
}
