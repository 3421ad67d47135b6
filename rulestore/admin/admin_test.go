package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// recordEvents is an events handler that keeps what it sees.
type recordEvents struct{}

var seenEvents struct {
	sync.Mutex
	list []string
}

func (recordEvents) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.rstest_record", New: func() caddy.Module { return recordEvents{} }}
}

func (recordEvents) Handle(_ context.Context, e caddy.Event) error {
	seenEvents.Lock()
	defer seenEvents.Unlock()
	seenEvents.list = append(seenEvents.list, fmt.Sprintf("%s %v/%v %v %v field=%v", e.Name(),
		e.Data["kind"], e.Data["id"], e.Data["op"], e.Data["source"], e.Data["field"]))
	return nil
}

func init() { caddy.RegisterModule(recordEvents{}) }

// runStoreWithEvents is runStore with the events app subscribed to the
// store's events.
func runStoreWithEvents(t *testing.T, store map[string]any) *instance {
	t.Helper()
	seenEvents.Lock()
	seenEvents.list = nil
	seenEvents.Unlock()
	in := &instance{testcaddy.NewStoreInstance(t, store)}
	testcaddy.RunJSON(t, testcaddy.SubscribeEvents(t, in.JSON(store), "rstest_record", rulestore.EventRuleUpdated, rulestore.EventRuleRejected))
	return in
}

func waitEvent(t *testing.T, want string) {
	t.Helper()
	testcaddy.Eventually(t, 10*time.Second, "event "+want, func() bool {
		seenEvents.Lock()
		defer seenEvents.Unlock()
		for _, e := range seenEvents.list {
			if e == want {
				return true
			}
		}
		return false
	})
}

// redisContents is every key with its value (hashes and the stream
// length), to show that a rejected write changed nothing.
func redisContents(t *testing.T, c *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		switch typ, _ := c.Type(ctx, k).Result(); typ {
		case "hash":
			fmt.Fprintf(&b, "%s=%v\n", k, c.HGetAll(ctx, k).Val())
		case "stream":
			fmt.Fprintf(&b, "%s len=%d\n", k, c.XLen(ctx, k).Val())
		case "string":
			fmt.Fprintf(&b, "%s=%s\n", k, c.Get(ctx, k).Val())
		default:
			fmt.Fprintf(&b, "%s (%s)\n", k, typ)
		}
	}
	return b.String()
}

func TestBindingsEndpoint(t *testing.T) {
	r := redistest.Start(t)
	in := runStore(t, redisStore(r.URL()))
	c := r.Client()
	ctx := context.Background()
	code, body := adminDo(t, in, "PUT", "/sluice/bindings/order_route?allow_missing=true", `{"rate_limit": "order_api", "gray": "vip, ramp"}`)
	if code != 200 || !strings.Contains(body, `"stored":"redis"`) {
		t.Fatalf("PUT binding: %d %s", code, body)
	}
	if v := c.HGetAll(ctx, "gateway:binding:order_route").Val(); v["rate_limit"] != "order_api" || v["gray"] != "vip, ramp" {
		t.Fatalf("binding hash: %v", v)
	}
	testcaddy.Eventually(t, 10*time.Second, "binding in force", func() bool {
		code, body := adminDo(t, in, "GET", "/sluice/bindings/order_route", "")
		return code == 200 && strings.Contains(body, `"rate_limit":"order_api"`)
	})
	if code, body := adminDo(t, in, "GET", "/sluice/bindings", ""); code != 200 || !strings.Contains(body, `"id":"order_route"`) {
		t.Fatalf("list bindings: %d %s", code, body)
	}
	testcaddy.Eventually(t, 10*time.Second, "verdict on the binding", func() bool {
		return c.Exists(ctx, "gateway:status:binding:order_route").Val() == 1
	})

	before := redisContents(t, c)
	for _, bad := range []struct{ path, body, want string }{
		{"/sluice/bindings/order_route", `{"rate_limit": "bad id"}`, "rate_limit"},
		{"/sluice/bindings/order_route", `{"ratelimit": "x"}`, "unknown field"},
		{"/sluice/bindings/order%20route", `{"rate_limit": "x"}`, "not allowed"},
	} {
		code, body := adminDo(t, in, "PUT", bad.path, bad.body)
		if code != 400 || !strings.Contains(body, bad.want) {
			t.Errorf("PUT %s %s: %d %s, want 400 with %q", bad.path, bad.body, code, body, bad.want)
		}
	}
	if after := redisContents(t, c); after != before {
		t.Fatalf("rejected writes changed Redis:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	if code, body := adminDo(t, in, "DELETE", "/sluice/bindings/order_route", ""); code != 200 {
		t.Fatalf("DELETE binding: %d %s", code, body)
	}
	testcaddy.Eventually(t, 10*time.Second, "binding gone", func() bool {
		code, _ := adminDo(t, in, "GET", "/sluice/bindings/order_route", "")
		return code == 404
	})
}

// Every kind of bad input is refused with 400 (or 404 for an unknown
// kind), names what is wrong, and leaves Redis exactly as it was.
func TestInvalidWritesLeaveRedisUntouched(t *testing.T) {
	r := redistest.Start(t)
	in := runStoreWithEvents(t, redisStore(r.URL()))
	c := r.Client()
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })
	if code, body := adminDo(t, in, "PUT", "/sluice/rules/rate_limit/keep", `{"qps": 3}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	in.waitQPS("keep", "3")
	// The store writes its verdict right after applying the rule.
	testcaddy.Eventually(t, 10*time.Second, "verdict on keep", func() bool {
		return c.Exists(context.Background(), "gateway:status:rate_limit:keep").Val() == 1
	})
	before := redisContents(t, c)
	long := strings.Repeat("a", rulestore.MaxIDLength+1)
	huge := `{"qps": "` + strings.Repeat("9", rulestore.MaxRuleBody) + `"}`
	for _, bad := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", "/sluice/rules/rate_limit/keep", `{"qps": "lots"}`, 400, "field qps"},
		{"PUT", "/sluice/rules/rate_limit/keep", `{"qps": 1, "color": "red"}`, 400, "field color"},
		{"PUT", "/sluice/rules/rate_limit/keep", `{}`, 400, "qps"},
		{"PUT", "/sluice/rules/rate_limit/keep", `not json`, 400, "JSON object"},
		{"PUT", "/sluice/rules/rate_limit/keep", `null`, 400, "qps"},
		{"PUT", "/sluice/rules/rate_limit/keep", `{"qps": {"x": 1}}`, 400, "field qps"},
		{"PUT", "/sluice/rules/rate_limit/keep", huge, 400, "bytes"},
		{"PUT", "/sluice/rules/rate_limit/" + long, `{"qps": 1}`, 400, "longer than"},
		{"PUT", "/sluice/rules/rate_limit/a$b", `{"qps": 1}`, 400, "not allowed"},
		{"DELETE", "/sluice/rules/rate_limit/a*", ``, 400, "not allowed"},
		{"PUT", "/sluice/rules/nonsense/x", `{"qps": 1}`, 404, "unknown rule kind"},
		{"PUT", "/sluice/rules/rate_limit", `{"qps": 1}`, 405, "not allowed"},
		{"POST", "/sluice/rules/rate_limit/keep", `{"qps": 1}`, 405, "not allowed"},
		{"PUT", "/sluice/state", `{}`, 405, "not allowed"},
	} {
		code, body := adminDo(t, in, bad.method, bad.path, bad.body)
		if code != bad.code || !strings.Contains(body, bad.want) {
			t.Errorf("%s %s %.40s: %d %.200s, want %d with %q", bad.method, bad.path, bad.body, code, body, bad.code, bad.want)
		}
	}
	if after := redisContents(t, c); after != before {
		t.Fatalf("rejected writes changed Redis:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if v, _ := in.rule("rate_limit", "keep"); v.Fields["qps"] != "3" {
		t.Fatalf("rule changed: %+v", v)
	}
	waitEvent(t, "rule_rejected rate_limit/keep <nil> admin_api field=qps")
	waitEvent(t, "rule_updated rate_limit/keep upsert redis field=<nil>")
}

// Concurrent writers of one rule never leave its hash and the newest
// change-log entry for it naming different versions.
func TestConcurrentWritersKeepHashAndLogInStep(t *testing.T) {
	r := redistest.Start(t)
	in := runStore(t, redisStore(r.URL()))
	c := r.Client()
	ctx := context.Background()
	const writers, writes = 8, 15
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < writes; i++ {
					// Different field sets, so a mixed-up hash shows.
					body := fmt.Sprintf(`{"qps": %d, "burst": "%d"}`, w*1000+i+1, w)
					if i%3 == 0 {
						body = fmt.Sprintf(`{"qps": %d, "limit_type": "w%d"}`, w*1000+i+1, w)
					}
					code, resp := adminDo(t, in, "PUT", "/sluice/rules/rate_limit/hot", body)
					if code != 200 {
						t.Errorf("PUT: %d %s", code, resp)
					}
				}
			}(w)
		}
		wg.Wait()
		hash := rulestore.Fields(c.HGetAll(ctx, "rate_limit:rule:hot").Val())
		entries := c.XRevRangeN(ctx, "gateway:rules", "+", "-", 1).Val()
		if len(entries) != 1 {
			t.Fatalf("no change-log entry")
		}
		if v := entries[0].Values["version"]; v != rulestore.Version(hash) {
			t.Fatalf("round %d: hash %v has version %s, newest change-log entry says %v", round, hash, rulestore.Version(hash), v)
		}
		// Every instance converges on that version.
		testcaddy.Eventually(t, 10*time.Second, "store holds the newest version", func() bool {
			v, ok := in.rule("rate_limit", "hot")
			return ok && v.Version == rulestore.Version(hash)
		})
	}
	if n := c.XLen(ctx, "gateway:rules").Val(); n != 5*writers*writes {
		t.Fatalf("change log has %d entries, want %d", n, 5*writers*writes)
	}
}

func scrape(t *testing.T, admin int) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/metrics", admin))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue is the value of the series named exactly so (name with
// labels), or -1.
func metricValue(metrics, series string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// A write through the admin API carries its publish time; the store that
// applies it records the delay.
func TestPropagationDelayIsMeasured(t *testing.T) {
	r := redistest.Start(t)
	in := runStore(t, redisStore(r.URL()))
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })
	before := metricValue(scrape(t, in.Admin), "sluice_rulestore_propagation_delay_seconds_count")
	code, body := adminDo(t, in, "PUT", "/sluice/rules/rate_limit/delay", `{"qps": 7}`)
	if code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	e := r.Client().XRevRangeN(context.Background(), "gateway:rules", "+", "-", 1).Val()
	if len(e) != 1 || e[0].Values["published_at"] == nil || e[0].Values["version"] != rulestore.Version(rulestore.Fields{"qps": "7"}) {
		t.Fatalf("change-log entry %v lacks published_at or version", e)
	}
	testcaddy.Eventually(t, 10*time.Second, "propagation delay observed", func() bool {
		return metricValue(scrape(t, in.Admin), "sluice_rulestore_propagation_delay_seconds_count") == before+1
	})
	m := scrape(t, in.Admin)
	if !strings.Contains(m, `sluice_rulestore_admin_writes_total{kind="rate_limit",op="upsert",result="ok"} `) {
		t.Fatalf("admin writes metric missing:\n%s", m)
	}
}

// Without Redis, writes act on memory, say so, and emit rule_updated.
func TestMemoryWritesEmitEvents(t *testing.T) {
	in := runStoreWithEvents(t, map[string]any{})
	code, body := adminDo(t, in, "PUT", "/sluice/bindings/mem_route?allow_missing=true", `{"rate_limit": "x"}`)
	if code != 200 || !strings.Contains(body, `"stored":"memory"`) {
		t.Fatalf("PUT: %d %s", code, body)
	}
	waitEvent(t, "rule_updated binding/mem_route upsert memory field=<nil>")
	if code, _ := adminDo(t, in, "DELETE", "/sluice/bindings/mem_route", ""); code != 200 {
		t.Fatalf("DELETE: %d", code)
	}
	waitEvent(t, "rule_updated binding/mem_route delete memory field=<nil>")
}

// Rules pushed to Redis by hand are validated by the store: a bad one
// emits rule_rejected, a good one rule_updated.
func TestRedisRuleEvents(t *testing.T) {
	r := redistest.Start(t)
	in := runStoreWithEvents(t, redisStore(r.URL()))
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })
	push(t, r.Client(), "ev", "qps", "2")
	waitEvent(t, "rule_updated rate_limit/ev upsert redis field=<nil>")
	push(t, r.Client(), "ev", "qps", "-1")
	waitEvent(t, "rule_rejected rate_limit/ev <nil> redis field=qps")
}

// GET /sluice/state has the store's section with rule versions.
func TestStateHasStoreSection(t *testing.T) {
	in := runStore(t, map[string]any{"rate_limit": map[string]any{"s": map[string]any{"qps": 4}}})
	code, body := adminDo(t, in, "GET", "/sluice/state", "")
	if code != 200 {
		t.Fatalf("GET /sluice/state: %d %s", code, body)
	}
	var st struct {
		Rulestore rulestore.StoreState `json:"rulestore"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	rs := st.Rulestore
	if rs.Redis || rs.Writes != "memory" || rs.Rules["rate_limit"] != 1 ||
		rs.Versions["rate_limit"]["s"] != (rulestore.RuleVersion{Version: rulestore.Version(rulestore.Fields{"qps": "4"}), Source: "static"}) {
		t.Fatalf("state: %s", body)
	}
}

// On Redis Cluster the hash and the change log live in different slots, so
// a write is not one transaction; it must still arrive, in order.
func TestAdminWritesOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	ctx := context.Background()
	in := runStore(t, map[string]any{"redis": map[string]any{"addrs": cl.Addrs(), "cluster": true}})
	testcaddy.Eventually(t, 15*time.Second, "connected", func() bool { return in.status().Connected })
	for i, id := range []string{"c1", "c2", "c3"} {
		body := fmt.Sprintf(`{"qps": %d}`, i+1)
		if code, resp := adminDo(t, in, "PUT", "/sluice/rules/rate_limit/"+id, body); code != 200 {
			t.Fatalf("PUT %s: %d %s", id, code, resp)
		}
		in.waitQPS(id, fmt.Sprint(i+1))
		if v := c.HGet(ctx, "rate_limit:rule:"+id, "qps").Val(); v != fmt.Sprint(i+1) {
			t.Fatalf("hash %s qps=%q", id, v)
		}
	}
	entries := c.XRange(ctx, "gateway:rules", "-", "+").Val()
	if len(entries) != 3 || entries[2].Values["id"] != "c3" || entries[2].Values["version"] != rulestore.Version(rulestore.Fields{"qps": "3"}) {
		t.Fatalf("change log: %v", entries)
	}
	if code, _ := adminDo(t, in, "DELETE", "/sluice/rules/rate_limit/c2", ""); code != 200 {
		t.Fatalf("DELETE: %d", code)
	}
	in.waitQPS("c2", "")
}
