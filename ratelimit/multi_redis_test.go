package ratelimit_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A route binding written in Redis with rate_limit=burst_rl,quota_rl puts
// both limits on the route: 3 pass, the next are refused by quota_rl with
// burst_rl's tokens given back; rebound live to burst_rl alone, the route
// passes again, spending burst_rl only.
func TestSeveralLimitsRouteBindingFromRedis(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}",
		"\tratelimit {\n\t\troute api\n\t}\n\trespond \"ok\"",
		"\tratelimit burst_rl\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	redistest.Push(t, c, "rate_limit:rule:burst_rl", "gateway:rules:rate_limit", "burst_rl",
		"qps", "0.0001", "burst", "20", "key_resolver", "global")
	redistest.Push(t, c, "rate_limit:rule:quota_rl", "gateway:rules:rate_limit", "quota_rl",
		"qps", "0.0001", "burst", "3", "key_resolver", "global")
	testcaddy.Eventually(t, 10*time.Second, "both rules loaded", func() bool {
		return ruleLoaded(t, s.adminPort, "burst_rl") && ruleLoaded(t, s.adminPort, "quota_rl")
	})
	redistest.Push(t, c, "gateway:binding:api", "gateway:rules:binding", "api", "rate_limit", "burst_rl,quota_rl")
	both := `"burst_rl";q=20;w=200000, "quota_rl";q=3;w=30000`
	var first *http.Response
	testcaddy.Eventually(t, 10*time.Second, "binding with both rules", func() bool {
		first, _ = testcaddy.Get(t, s.urls[0])
		return first.Header.Get("RateLimit-Policy") == both
	})
	// Until then the route had no binding and its requests spent nothing.
	if first.StatusCode != http.StatusOK || first.Header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("first request under both: %d remaining %q, want 200 with quota_rl's 2",
			first.StatusCode, first.Header.Get("X-RateLimit-Remaining"))
	}
	expect(t, s.urls[0], []int{200, 200, 429, 429, 429})
	resp, _ := testcaddy.Get(t, s.urls[1])
	if resp.Header.Get("X-RateLimit-Remaining") != "16" {
		t.Fatalf("burst_rl alone: remaining %q, want 20 - 3 - 1 = 16 (the 3 refused gave theirs back)",
			resp.Header.Get("X-RateLimit-Remaining"))
	}

	redistest.Push(t, c, "gateway:binding:api", "gateway:rules:binding", "api", "rate_limit", "burst_rl")
	testcaddy.Eventually(t, 10*time.Second, "binding with burst_rl alone", func() bool {
		first, _ = testcaddy.Get(t, s.urls[0])
		return first.Header.Get("RateLimit-Policy") == `"burst_rl";q=20;w=200000`
	})
	// The requests refused meanwhile (by quota_rl) spent nothing.
	for i, want := range []int{15, 14, 13, 12} {
		if i > 0 {
			first, _ = testcaddy.Get(t, s.urls[0])
		}
		if first.StatusCode != http.StatusOK || first.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(want) {
			t.Fatalf("burst_rl alone, request %d: %d remaining %q, want 200 with %d",
				i+1, first.StatusCode, first.Header.Get("X-RateLimit-Remaining"), want)
		}
	}
}

func ruleLoaded(t *testing.T, adminPort int, id string) bool {
	t.Helper()
	resp, _ := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/rules/rate_limit/%s", adminPort, id))
	return resp.StatusCode == http.StatusOK
}

// multiClusterSites are two cluster rules on one route (first and second,
// of the given bursts, in all), and first alone on another, over Redis.
func multiClusterSites(first, second int) (both, firstAlone string) {
	rule := func(head string, burst int) string {
		return fmt.Sprintf(`%s
			qps 0.0001
			burst %d
			key_resolver global
			scope cluster
			redis_timeout 5s
		}`, head, burst)
	}
	both = "\tratelimit {\n\t\t" + rule("limit first {", first) + "\n\t\t" + rule("limit second {", second) + "\n\t}\n\trespond \"ok\""
	firstAlone = "\t" + rule("ratelimit {\n\t\tid first", first) + "\n\trespond \"ok\""
	return both, firstAlone
}

func twoSites(a, b string) []string { return []string{a, b} }

// fleetOfTwo starts two Caddy instances sharing one Redis, each serving
// sites, and returns their ports (one per site); their logs are shown if
// the test fails.
func fleetOfTwo(t *testing.T, sites ...string) (p, q []int) {
	rd := redistest.Start(t)
	p, q = ports(t, len(sites)), ports(t, len(sites))
	a := testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), p, sites...))
	b := testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), q, sites...))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("a:\n%s\nb:\n%s", a.Logs(), b.Logs())
		}
	})
	return p, q
}

// The cluster variant: two Caddy processes sharing Redis, 32 concurrent
// requests spread over both: exactly 8 pass in all (the second rule's
// quota), and the first rule's count in Redis is exactly 10 - 8: the
// tokens taken for requests the second refused came back (the refund is a
// negative charge riding the client's batch of scripts), and neither
// instance keeps refusing on a refusal Redis told it while refunds were
// on their way.
func TestSeveralLimitsClusterNoLeak(t *testing.T) {
	p, q := fleetOfTwo(t, twoSites(multiClusterSites(10, 8))...)
	got := concurrentOK(t, 32, func(i int) string {
		if i%2 == 0 {
			return url(p[0])
		}
		return url(q[0])
	})
	if got != 8 {
		t.Fatalf("admitted %d of 32 over two instances, want exactly 8", got)
	}
	// An instance keeps a refusal Redis told it for a listed rule at most
	// listedRecheck (20ms), then asks again: a refused probe spends nothing.
	var resp *http.Response
	testcaddy.Eventually(t, 5*time.Second, "first admits again on b", func() bool {
		resp, _ = testcaddy.Get(t, url(q[1]))
		return resp.StatusCode == http.StatusOK
	})
	if resp.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("first alone: %d remaining %q, want 200 with 10 - 8 - 1 = 1",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
}

// Several cluster limits are decided by one script that spends on all or
// none, so a request the second rule refuses never holds the first rule's
// tokens, not even for a moment: 64 requests on the route with both (8
// pass, by the second) race 92 requests on the first alone over two
// instances sharing Redis, and the first's 100 tokens serve exactly those
// 8 + 92; not one of the 92 is refused. With take-then-refund, tokens
// taken for a refused request and not yet given back refused some of them.
func TestSeveralLimitsClusterAtomic(t *testing.T) {
	p, q := fleetOfTwo(t, twoSites(multiClusterSites(100, 8))...)
	var both, alone atomic.Int64
	got := concurrentOKCounted(t, 64+92, func(i int) (string, *atomic.Int64) {
		inst := p
		if i%2 == 1 {
			inst = q
		}
		if i < 64 {
			return url(inst[0]), &both
		}
		return url(inst[1]), &alone
	})
	if both.Load() != 8 || alone.Load() != 92 || got != 100 {
		t.Fatalf("admitted %d with both limits (want 8) and %d with the first alone (want 92)", both.Load(), alone.Load())
	}
	for _, u := range []string{url(p[1]), url(q[0])} {
		resp, _ := testcaddy.Get(t, u)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-RateLimit-Remaining") != "0" {
			t.Fatalf("%s after: %d remaining %q, want 429 with 0 (100 - 8 - 92)", u, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
		}
	}
}
