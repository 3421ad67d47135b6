package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

func limitHeader(t *testing.T, url string) string {
	resp, _ := testcaddy.Get(t, url)
	return resp.Header.Get("X-RateLimit-Limit")
}

// A rule pushed to Redis mid-traffic applies to the next requests; a change
// of numbers keeps the counters, a change of limit_type resets them; a bad
// rule is rejected and the last good one stays; a route binding pushed to
// Redis moves the route to another rule.
func TestRuleFromRedisLive(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	redistest.Push(t, c, "rate_limit:rule:api", "gateway:rules:rate_limit", "api",
		"qps", "0.01", "burst", "3", "key_resolver", "global")
	s := caddyfile(t, fmt.Sprintf("\trulestore {\n\t\tredis %s\n\t}", r.URL()),
		"ratelimit api\n\trespond \"ok\"",
		"ratelimit {\n\t\troute checkout\n\t}\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	testcaddy.Eventually(t, 10*time.Second, "rule api loaded from redis", func() bool { return limitHeader(t, s.urls[0]) == "3" })
	// One request went to the wait above: two left, then 429.
	expect(t, s.urls[0], []int{200, 200, 429})

	// Numbers change: the new limit shows at once, the spent tokens stay spent.
	redistest.Push(t, c, "rate_limit:rule:api", "gateway:rules:rate_limit", "api", "burst", "10")
	testcaddy.Eventually(t, 10*time.Second, "burst 10 in force", func() bool { return limitHeader(t, s.urls[0]) == "10" })
	expect(t, s.urls[0], []int{429})

	// A bad update is rejected; the last good rule stays in force. The
	// store's rejected count and a later rule (messages are handled in
	// order) are the signs the bad one was processed; neither holds before.
	rejectedBefore := storeRejected(t, s.adminPort)
	if markerLoaded(t, s.adminPort) {
		t.Fatal("marker rule present before it was pushed")
	}
	redistest.Push(t, c, "rate_limit:rule:api", "gateway:rules:rate_limit", "api", "qps", "-5")
	redistest.Push(t, c, "rate_limit:rule:marker", "gateway:rules:rate_limit", "marker", "qps", "1")
	testcaddy.Eventually(t, 10*time.Second, "bad update rejected and marker rule loaded", func() bool {
		return storeRejected(t, s.adminPort) > rejectedBefore && markerLoaded(t, s.adminPort)
	})
	if got := limitHeader(t, s.urls[0]); got != "10" {
		t.Fatalf("after the bad update X-RateLimit-Limit is %q, want the last good 10", got)
	}
	expect(t, s.urls[0], []int{429})

	// limit_type changes: fresh counters under the new engine.
	c.HDel(context.Background(), "rate_limit:rule:api", "burst")
	redistest.Push(t, c, "rate_limit:rule:api", "gateway:rules:rate_limit", "api",
		"qps", "0.1", "limit_type", "sliding_window", "window_size", "60")
	testcaddy.Eventually(t, 10*time.Second, "sliding window rule", func() bool { return limitHeader(t, s.urls[0]) == "6" })
	// The request that saw it used one of the 6.
	expect(t, s.urls[0], []int{200, 200, 200, 200, 200, 429})

	// The route has no binding yet: requests pass. Then it is bound to a
	// rule pushed to Redis, and limited by it.
	expect(t, s.urls[1], []int{200, 200, 200})
	redistest.Push(t, c, "rate_limit:rule:checkout_rl", "gateway:rules:rate_limit", "checkout_rl",
		"qps", "0.01", "burst", "2", "key_resolver", "global")
	redistest.Push(t, c, "gateway:binding:checkout", "gateway:rules:binding", "checkout", "rate_limit", "checkout_rl")
	testcaddy.Eventually(t, 10*time.Second, "route bound", func() bool { return limitHeader(t, s.urls[1]) == "2" })
	expect(t, s.urls[1], []int{200, 429})
}

// storeRejected reads the store's count of rejected rules from the admin API.
func storeRejected(t *testing.T, adminPort int) int64 {
	t.Helper()
	_, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/store", adminPort))
	var st struct {
		Rejected *int64 `json:"rejected"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Rejected == nil {
		t.Fatalf("GET /sluice/store: %v: %s", err, body)
	}
	return *st.Rejected
}

// markerLoaded tells whether the store holds rate_limit rule "marker".
func markerLoaded(t *testing.T, adminPort int) bool {
	t.Helper()
	resp, _ := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/rules/rate_limit/marker", adminPort))
	return resp.StatusCode == 200
}
