package clicmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit/replay"
)

const previewCaddyfile = `{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
	}
}
http://127.0.0.1:%d {
	ratelimit pv
	respond "ok"
}`

// startPreviewFleet starts two instances of caddyfile (its %s the Redis
// URL, its %d the site's port) and waits until both hold rule kind/id
// and listen for previews.
func startPreviewFleet(t *testing.T, rd *redistest.Server, caddyfile, kind, id string) ([]int, []*testcaddy.Process) {
	t.Helper()
	ports := []int{testcaddy.FreePort(t), testcaddy.FreePort(t)}
	var ps []*testcaddy.Process
	for _, port := range ports {
		ps = append(ps, testcaddy.Start(t, fmt.Sprintf(caddyfile, rd.URL(), port)))
	}
	for _, p := range ps {
		testcaddy.Eventually(t, 10*time.Second, id+" loaded from redis", func() bool {
			_, _, ok := sluice(t, p, "rules", "get", kind, id)
			return ok
		})
	}
	c, ctx := rd.Client(), context.Background()
	testcaddy.Eventually(t, 15*time.Second, "two live instances, both listening for previews", func() bool {
		subs := c.PubSubNumSub(ctx, "gateway:preview").Val()["gateway:preview"]
		return subs == 2 && c.ZCount(ctx, "gateway:instances", strconv.FormatInt(time.Now().UnixMilli(), 10), "+inf").Val() == 2
	})
	return ports, ps
}

// `caddy sluice preview` asks every live instance through Redis: two
// instances each replay their own traffic, and the CLI prints the sum and
// that both answered. A tightened limit newly refuses requests of named
// keys; a loosened one newly allows some.
func TestPreviewSumsTwoInstances(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	redistest.Push(t, c, "rate_limit:rule:pv", "gateway:rules:rate_limit", "pv", "limit_type", "token_bucket",
		"qps", "2", "burst", "3", "key_resolver", "{http.request.header.X-K}", "raw_keys", "true")
	ports, ps := startPreviewFleet(t, rd, previewCaddyfile, "rate_limit", "pv")
	ctx := context.Background()
	const each = 2000
	refused := 0
	for i, port := range ports {
		refused += testcaddy.KeyedTraffic(t, fmt.Sprintf("http://127.0.0.1:%d/", port), each, 500, 50, uint64(i))
	}
	if refused == 0 {
		t.Fatal("no request refused: the traffic does not test the rule")
	}

	out := mustSluice(t, ps[0], "preview", "rate_limit", "pv", "qps", "1", "burst", "1")
	t.Logf("tightened:\n%s", out)
	m := regexp.MustCompile(`newly refused +(\d+) \((\d+) keys\)`).FindStringSubmatch(out)
	if !strings.Contains(out, "2 of 2 instances answered") || !strings.Contains(out, fmt.Sprintf("requests          %d\n", 2*each)) ||
		!strings.Contains(out, fmt.Sprintf("(recorded %d)", refused)) || m == nil || m[1] == "0" || m[2] == "0" ||
		!strings.Contains(out, "    key0:user:") {
		t.Errorf("tightened: want 2 of 2 instances, %d requests, %d recorded refusals, requests and keys newly refused, named keys:\n%s",
			2*each, refused, out)
	}

	var res struct {
		DryRun bool           `json:"dry_run"`
		Impact *replay.Impact `json:"impact"`
	}
	raw := mustSluice(t, ps[1], "preview", "rate_limit", "pv", "burst=20", "--json")
	if err := json.Unmarshal([]byte(raw), &res); err != nil || res.Impact == nil || !res.DryRun {
		t.Fatalf("loosened --json: %v\n%s", err, raw)
	}
	imp := res.Impact
	if imp.Instances != (replay.Instances{Asked: 2, Answered: 2}) || imp.Requests != 2*each || imp.NewlyAllowed == 0 ||
		imp.KeysNewlyAllowed == 0 || imp.RefusedRecorded != int64(refused) || imp.RefusedProposed >= imp.RefusedNow {
		t.Errorf("loosened: %+v; want 2 of 2 instances, %d requests, %d recorded refusals, some newly allowed", *imp, 2*each, refused)
	}
	// A live instance that does not answer (a heartbeat without a
	// process): the asker waits out its deadline and says so.
	c.ZAdd(ctx, "gateway:instances", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "silent"})
	start := time.Now()
	out = mustSluice(t, ps[0], "preview", "rate_limit", "pv", "qps", "1")
	if took := time.Since(start); !strings.Contains(out, "2 of 3 instances answered") || took < time.Second {
		t.Errorf("with a silent instance, after %v:\n%s\nwant 2 of 3 instances answered, after the 1 s wait", took, out)
	}
	// Nothing was written: the rule in Redis is as pushed.
	if got := c.HGet(ctx, "rate_limit:rule:pv", "burst").Val(); got != "3" {
		t.Errorf("burst in redis %q after previews, want 3", got)
	}
}
