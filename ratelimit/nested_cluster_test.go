package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
)

// orgOf100Cluster is orgOf100 with scope cluster at both levels: the org's
// 100/s is the fleet's.
var orgOf100Cluster = strings.ReplaceAll(orgOf100, "\t\t\tkey_resolver", "\t\t\tscope cluster\n\t\t\tredis_timeout 500ms\n\t\t\tkey_resolver")

// twoCaddysOnOneTree starts two Caddy processes sharing one Redis and the
// org's tree of scope cluster, and returns their URLs and the Redis.
func twoCaddysOnOneTree(t testing.TB) ([2]string, *redis.Client) {
	rd := redistest.Start(t)
	p, q := ports(t, 1), ports(t, 1)
	global := "redis " + rd.URL() + "\n" + strings.TrimPrefix(strings.TrimSuffix(orgOf100Cluster, "\t}"), "\trulestore {\n")
	site := "\tratelimit team\n\trespond \"ok\""
	testcaddy.Start(t, fleetConfig(t, global, p, site))
	testcaddy.Start(t, fleetConfig(t, global, q, site))
	return [2]string{url(p[0]), url(q[0])}, rd.Client()
}

// scriptCalls is how many scripts Redis was asked to run (EVALSHA and
// EVAL), and how many of those asks found the script not loaded yet
// (NOSCRIPT: the client then sends it whole).
func scriptCalls(t *testing.T, c *redis.Client) (calls, noscript int) {
	t.Helper()
	stats, err := c.Info(context.Background(), "commandstats", "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		line = strings.TrimSpace(line)
		if name, rest, ok := strings.Cut(line, ":calls="); ok && (name == "cmdstat_evalsha" || name == "cmdstat_eval") {
			calls += leadingInt(rest)
		}
		if rest, ok := strings.CutPrefix(line, "errorstat_NOSCRIPT:count="); ok {
			noscript += leadingInt(rest)
		}
	}
	return calls, noscript
}

// leadingInt is the number s starts with, up to a comma.
func leadingInt(s string) int {
	s, _, _ = strings.Cut(s, ",")
	v, _ := strconv.Atoi(s)
	return v
}

// On two instances sharing Redis, two teams guaranteed 50 % each of the
// org's 100/s, team a asking 300/s and team b 40/s, each spread over both
// instances: b gets (nearly) all it asks, a the rest, and the org never
// admits more than 100/s and its slack over the fleet. Each decision is
// one script call, whatever the tree's depth. The bounds are wide for a
// busy machine; BenchmarkNestedClusterGoodput measures the goal.
func TestNestedClusterGuaranteeOnTwoCaddys(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 340 requests a second for 3 s over two Caddy processes")
	}
	urls, c := twoCaddysOnOneTree(t)
	a1, a2 := &flow{team: "a", rate: 150}, &flow{team: "a", rate: 150}
	b1, b2 := &flow{team: "b", rate: 20}, &flow{team: "b", rate: 20}
	before, _ := scriptCalls(t, c)
	done := make(chan time.Duration, 1)
	go func() { done <- drive(t, urls[1], 3*time.Second, a2, b2) }()
	took := max(drive(t, urls[0], 3*time.Second, a1, b1), <-done)
	scripts, noscript := scriptCalls(t, c)
	scripts -= before
	aOK, bOK := a1.ok.Load()+a2.ok.Load(), b1.ok.Load()+b2.ok.Load()
	aSent, bSent := a1.sent.Load()+a2.sent.Load(), b1.sent.Load()+b2.sent.Load()
	t.Logf("two instances, %v: a %d of %d, b %d of %d; %d script calls (%d found it not loaded)", took, aOK, aSent, bOK, bSent, scripts, noscript)
	if bound := 100*took.Seconds() + orgSlack; float64(aOK+bOK) > bound {
		t.Fatalf("the org admitted %d in %v, over 100/s × t + %d = %.0f", aOK+bOK, took, orgSlack, bound)
	}
	if bOK < bSent*8/10 {
		t.Fatalf("team b got %d of %d within its guarantee, want at least 80 %%", bOK, bSent)
	}
	if min := int64(100*3*0.5) - bOK; aOK < min {
		t.Fatalf("team a got %d, want at least %d (half of what the org had left over 3 s)", aOK, min)
	}
	// An EVALSHA that finds the script not loaded is sent again whole:
	// that happens only in each instance's first batches in flight.
	if int64(scripts-noscript) != aSent+bSent || noscript*100 > scripts {
		t.Fatalf("%d script calls (%d not loaded) for %d decisions, want one each, and a resend for at most 1 %% of them", scripts, noscript, aSent+bSent)
	}
}

// 64 requests at once, again and again, from two teams over two
// instances: the fleet's org admits at most 100/s and its slack.
func TestNestedClusterOrgCapUnderConcurrency(t *testing.T) {
	urls, _ := twoCaddysOnOneTree(t)
	var ok atomic.Int64
	start := time.Now()
	for round := 0; round < 10; round++ {
		n := concurrentOK(t, 64, func(i int) string { return urls[i%2] + "?team=" + []string{"a", "b"}[i/2%2] })
		ok.Add(int64(n))
	}
	took := time.Since(start)
	t.Logf("admitted %d of 640 over two instances in %v", ok.Load(), took)
	if bound := 100*took.Seconds() + orgSlack; float64(ok.Load()) > bound || ok.Load() < 10 {
		t.Fatalf("the org admitted %d of 640 in %v, want 10 (its burst) to 100/s × t + %d = %.0f", ok.Load(), took, orgSlack, bound)
	}
}

// A tree of scope cluster whose Redis is gone follows the leaf rule's
// on_redis_error for the leaf's key: deny answers 503, allow lets the
// request through; with Redis the org's burst of 2 is shared by its
// teams, and the quota API reads each level's use from Redis (buckets
// refill a token in 2.8 hours, so the thousandths do not move).
func TestNestedClusterFollowsOnRedisError(t *testing.T) {
	rd := redistest.Start(t)
	team := func(id, mode string) string {
		return "\t\trate_limit " + id + " {\n\t\t\tqps 0.0001\n\t\t\tburst 2\n\t\t\tscope cluster\n\t\t\tredis_timeout 500ms\n\t\t\ton_redis_error " + mode +
			"\n\t\t\tkey_resolver {http.request.header.X-Team}\n\t\t\tparent org\n\t\t\tparent_key global\n\t\t}\n"
	}
	rules := "\trulestore {\n\t\tredis " + rd.URL() + "\n\t\trate_limit org {\n\t\t\tqps 0.0001\n\t\t\tburst 2\n\t\t\tscope cluster\n\t\t\tkey_resolver global\n\t\t}\n" +
		team("tdeny", "deny") + team("tallow", "allow") + "\t}"
	s := caddyfile(t, rules, "\tratelimit tdeny\n\trespond \"ok\"", "\tratelimit tallow\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200}, "X-Team: a")
	expect(t, s.urls[1], []int{200, 429}, "X-Team: b")
	expect(t, s.urls[0], []int{429}, "X-Team: a")
	resp, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/quota_tree/tdeny?header.X-Team=a", s.adminPort))
	var tree ratelimit.QuotaTree
	if err := json.Unmarshal([]byte(body), &tree); resp.StatusCode != http.StatusOK || err != nil || len(tree.Levels) != 2 {
		t.Fatalf("quota_tree: %d %v\n%s", resp.StatusCode, err, body)
	}
	leaf, org := tree.Levels[0], tree.Levels[1]
	if leaf.Rule != "tdeny" || leaf.Used != 1 || leaf.Remaining != 1 || !leaf.Tracked ||
		org.Rule != "org" || org.Used != 2 || org.Remaining != 0 || !org.Tracked {
		t.Fatalf("quota_tree: %+v, want tdeny used 1 of 2 and org 2 of 2, both tracked", tree)
	}
	rd.Kill()
	expect(t, s.urls[0], []int{503}, "X-Team: a")
	expect(t, s.urls[1], []int{200, 200}, "X-Team: b")
}
