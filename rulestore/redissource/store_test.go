package redissource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluicegw/sluice/rulestore"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore/redisconf"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// The store's own tests run without the handler packages, so they register
// a small parser for rate_limit rules: qps must be a number > 0.
func init() {
	rulestore.RegisterParser(rulestore.RateLimit, func(id string, f rulestore.Fields) (any, error) {
		for _, name := range f.Names() {
			switch name {
			case "qps":
				q, err := strconv.ParseFloat(f[name], 64)
				if err != nil || q <= 0 {
					return nil, f.Errorf(name, "want a number > 0")
				}
			case "limit_type", "burst", "key_resolver":
			default:
				return nil, f.Errorf(name, "unknown field")
			}
		}
		if f["qps"] == "" {
			return nil, f.Errorf("qps", "required")
		}
		return f["qps"], nil
	})
}

// instance is an in-process Caddy running only the rulestore app
// (testcaddy.StoreInstance); the store's tests read the running store
// itself, not its admin API (package admin).
type instance struct{ *testcaddy.StoreInstance }

func runStore(t *testing.T, store map[string]any) *instance {
	t.Helper()
	return &instance{testcaddy.RunStore(t, store)}
}

// app is the running config's store.
func (in *instance) app() *rulestore.App {
	in.T.Helper()
	v, err := caddy.ActiveContext().AppIfConfigured("rulestore")
	if err != nil {
		in.T.Fatal(err)
	}
	return v.(*rulestore.App)
}

// ruleSeen is what the running store holds for a rule.
type ruleSeen struct {
	Fields rulestore.Fields
	Source string
}

// rule reads a rule from the running store; ok is false when none is in
// force.
func (in *instance) rule(kind, id string) (v ruleSeen, ok bool) {
	in.T.Helper()
	k, known := rulestore.ParseKind(kind)
	if !known {
		in.T.Fatalf("unknown kind %q", kind)
	}
	if r := in.app().Lookup(k, id); r != nil {
		return ruleSeen{Fields: r.Fields, Source: r.Source}, true
	}
	return v, false
}

func (in *instance) status() rulestore.Status { return in.app().Status() }

// waitQPS waits until the rule is in force with this qps ("" = absent).
func (in *instance) waitQPS(id, qps string) {
	in.T.Helper()
	testcaddy.Eventually(in.T, 10*time.Second, fmt.Sprintf("rule %s qps=%q", id, qps), func() bool {
		r := in.app().Lookup(rulestore.RateLimit, id)
		return (r == nil && qps == "") || (r != nil && r.Fields["qps"] == qps)
	})
}

func redisStore(url string) map[string]any {
	return map[string]any{"redis": map[string]any{"url": url}, "resync": "30s"}
}

func push(t *testing.T, c redis.Cmdable, id string, fields ...any) {
	t.Helper()
	redistest.Push(t, c, "rate_limit:rule:"+id, "gateway:rules:rate_limit", id, fields...)
}

func TestStaticRulesWithoutRedis(t *testing.T) {
	in := runStore(t, map[string]any{"rate_limit": map[string]any{"order_api": map[string]any{"qps": 100, "limit_type": "token_bucket"}}})
	v, ok := in.rule("rate_limit", "order_api")
	if !ok || v.Source != "static" || v.Fields["qps"] != "100" {
		t.Fatalf("static rule: got %+v, %v", v, ok)
	}
	if st := in.status(); st.Redis || st.Rules["rate_limit"] != 1 {
		t.Fatalf("status = %+v", st)
	}
	if !strings.Contains(in.Logs(), "no redis configured") {
		t.Fatal("no log line saying redis is not in use")
	}
}

func TestBadStaticRuleFailsValidation(t *testing.T) {
	b, _ := json.Marshal(map[string]any{"apps": map[string]any{"rulestore": map[string]any{
		"rate_limit": map[string]any{"order_api": map[string]any{"qps": -1}}}}})
	var cfg caddy.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	err := caddy.Validate(&cfg)
	if err == nil || !strings.Contains(err.Error(), `order_api`) || !strings.Contains(err.Error(), "field qps") {
		t.Fatalf("want an error naming the rule and field, got %v", err)
	}
}

func TestPublishUpdatesAndDeletes(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, map[string]any{
		"redis":      map[string]any{"url": r.URL()},
		"rate_limit": map[string]any{"order_api": map[string]any{"qps": 100}},
	})
	push(t, c, "order_api", "limit_type", "TOKEN_BUCKET", "qps", "7")
	in.waitQPS("order_api", "7")
	if v, _ := in.rule("rate_limit", "order_api"); v.Source != "redis" {
		t.Fatalf("source = %s, want redis (Redis overrides static)", v.Source)
	}
	push(t, c, "new_api", "qps", "3")
	in.waitQPS("new_api", "3")

	c.Del(context.Background(), "rate_limit:rule:new_api")
	c.Publish(context.Background(), "gateway:rules:rate_limit", "new_api")
	in.waitQPS("new_api", "")

	// Deleting the Redis copy of a rule brings the static one back.
	c.Del(context.Background(), "rate_limit:rule:order_api")
	c.Publish(context.Background(), "gateway:rules:rate_limit", "order_api")
	in.waitQPS("order_api", "100")
}

func TestBadRuleKeepsLastGood(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, redisStore(r.URL()))
	push(t, c, "order_api", "qps", "5")
	in.waitQPS("order_api", "5")

	push(t, c, "order_api", "qps", "-3")
	in.WaitLog("rule rejected", "rate_limit:rule:order_api", `"field":"qps"`)
	if v, _ := in.rule("rate_limit", "order_api"); v.Fields["qps"] != "5" {
		t.Fatalf("bad update replaced the rule: %+v", v)
	}
	// A later good update still applies.
	push(t, c, "order_api", "qps", "6")
	in.waitQPS("order_api", "6")
}

func TestGarbageOnChannelChangesNothing(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, redisStore(r.URL()))
	push(t, c, "a", "qps", "1")
	in.waitQPS("a", "1")
	ctx := context.Background()
	c.Publish(ctx, "gateway:rules:rate_limit", strings.Repeat("x", 1<<20))
	c.Publish(ctx, "gateway:rules:rate_limit", "\x00\xff binary")
	c.Publish(ctx, "gateway:rules:rate_limit", "no_such_rule")
	in.WaitLog("ignoring message")
	push(t, c, "b", "qps", "2")
	in.waitQPS("b", "2")
	if v, ok := in.rule("rate_limit", "a"); !ok || v.Fields["qps"] != "1" {
		t.Fatalf("rule a changed: %+v %v", v, ok)
	}
}

func TestRedisDownAtStartup(t *testing.T) {
	r := redistest.Start(t)
	r.Kill()
	st := redisStore(r.URL())
	st["resync"] = "1s"
	st["rate_limit"] = map[string]any{"static_api": map[string]any{"qps": 9}}
	in := runStore(t, st)
	in.waitQPS("static_api", "9")
	in.WaitLog("redis unavailable")
	r.Restart()
	// Written without PUBLISH: found by the first load or the periodic resync.
	r.Client().HSet(context.Background(), "rate_limit:rule:late", "qps", "4")
	in.waitQPS("late", "4")
	// The rules go in force during the session's first resync; the status
	// reads connected once that resync has also written its verdicts, a
	// few round trips later.
	testcaddy.Eventually(t, 10*time.Second, "status connected after the rules loaded", func() bool {
		return in.status().Connected
	})
}

func TestRedisHungAtStartup(t *testing.T) {
	r := redistest.Start(t)
	r.Client().HSet(context.Background(), "rate_limit:rule:waiting", "qps", "4")
	r.Pause()
	in := runStore(t, map[string]any{
		"redis":      map[string]any{"url": r.URL()},
		"rate_limit": map[string]any{"static_api": map[string]any{"qps": 9}},
	})
	in.waitQPS("static_api", "9") // serving at once, not blocked on Redis
	in.WaitLog("redis unavailable")
	if _, ok := in.rule("rate_limit", "waiting"); ok {
		t.Fatal("rule loaded from a paused Redis")
	}
	r.Resume()
	in.waitQPS("waiting", "4")
}

// proxy is a TCP proxy between Caddy and Redis that the test can cut, to
// disconnect one instance while Redis stays up.
type proxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	up    bool
}

func startProxy(t *testing.T, to string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to, up: true}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if !p.up {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
}

func TestChangesWhileDisconnectedAreApplied(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	p := startProxy(t, r.Addr)
	in := runStore(t, redisStore("redis://"+p.addr()))
	push(t, c, "a", "qps", "1")
	push(t, c, "gone", "qps", "1")
	in.waitQPS("a", "1")
	in.waitQPS("gone", "1")

	p.cut()
	in.WaitLog("redis unavailable")
	// Published while this instance cannot hear it: the messages are lost.
	push(t, c, "a", "qps", "2")
	push(t, c, "b", "qps", "3")
	c.Del(context.Background(), "rate_limit:rule:gone")
	c.Publish(context.Background(), "gateway:rules:rate_limit", "gone")

	p.restore()
	in.waitQPS("a", "2")
	in.waitQPS("b", "3")
	in.waitQPS("gone", "")
}

func TestRedisRestartedEmptyKeepsRules(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, redisStore(r.URL()))
	push(t, c, "a", "qps", "1")
	push(t, c, "b", "qps", "2")
	in.waitQPS("a", "1")
	in.waitQPS("b", "2")

	r.Restart() // no persistence: comes back empty
	in.WaitLog("redis lost its data")
	in.WaitLog("resynced rules from redis", `"retained":2`)
	if _, ok := in.rule("rate_limit", "a"); !ok {
		t.Fatalf("rule a dropped after Redis lost its data:\n%s", in.StoreLogs())
	}
	// Rules pushed after the loss apply; a deliberate delete still deletes.
	push(t, c, "c", "qps", "3")
	in.waitQPS("c", "3")
	c.Publish(context.Background(), "gateway:rules:rate_limit", "b")
	in.waitQPS("b", "")
	if _, ok := in.rule("rate_limit", "a"); !ok {
		t.Fatalf("rule a dropped:\n%s", in.StoreLogs())
	}
}

// TestRefreshAfterDataLossRetains covers the race behind an intermittent
// failure of TestRedisRestartedEmptyKeepsRules: a rule re-read (for a
// message) on a connection go-redis redialled to a Redis that lost its
// data, before the subscription noticed. FLUSHALL makes it deterministic:
// the subscription stays up, the data and the epoch marker go, and a
// message names a held rule. The absent hash is lost data, not a delete.
func TestRefreshAfterDataLossRetains(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, redisStore(r.URL()))
	push(t, c, "a", "qps", "1")
	push(t, c, "b", "qps", "2")
	in.waitQPS("a", "1")
	in.waitQPS("b", "2")

	r.Flush()
	c.Publish(context.Background(), "gateway:rules:rate_limit", "a")
	in.WaitLog("resynced rules from redis", `"reason":"epoch changed"`, `"retained":2`)
	for _, id := range []string{"a", "b"} {
		if _, ok := in.rule("rate_limit", id); !ok {
			t.Fatalf("rule %s dropped after Redis lost its data:\n%s", id, in.StoreLogs())
		}
	}
	if strings.Contains(in.Logs(), `"msg":"rule deleted"`) {
		t.Fatalf("a rule was deleted after Redis lost its data:\n%s", in.StoreLogs())
	}
	// Once the messages from before the loss are read, a deliberate delete
	// (DEL + PUBLISH) deletes.
	in.WaitLog("messages from before redis lost its data are all read")
	c.Publish(context.Background(), "gateway:rules:rate_limit", "b")
	in.waitQPS("b", "")
	if _, ok := in.rule("rate_limit", "a"); !ok {
		t.Fatal("rule a dropped")
	}
}

// TestMessagesTakenBeforeDataLossDoNotDelete covers the other race behind
// TestRedisRestartedEmptyKeepsRules's intermittent failure: a session took
// the messages naming held rules, then its connection died (Redis
// restarted empty) before it re-read them. The next session's resync
// retained the rules, and the re-read queued before it then deleted them.
// The session's steps are run here in the order that race gives them.
func TestMessagesTakenBeforeDataLossDoNotDelete(t *testing.T) {
	r, src := resyncedWith(t, rulesAB)
	ctx := context.Background()
	// The messages of the writes above, taken by the session...
	for _, id := range []string{"a", "b"} {
		src.queue.add(rulestore.RuleRef{Kind: rulestore.RateLimit, ID: id}, time.Now())
	}
	// ...whose connection then died: Redis came back empty.
	r.Restart()
	if err := src.fullResync(ctx, "connected"); err != nil {
		t.Fatal(err)
	}
	if err := src.flushPending(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if src.snapshot().Get(rulestore.RateLimit, id) == nil {
			t.Errorf("rule %s dropped after Redis lost its data", id)
		}
	}
}

// TestMessagesReadAfterTheLossResyncDoNotDelete covers the race behind
// TestRefreshAfterDataLossRetains's intermittent failure on a busy
// machine: a message naming a rule, published before Redis lost its data,
// was taken only after the resync that found the loss, and its re-read
// deleted the retained rule. Until the subscription answers the loss
// fence's PING (every message published before it has then been read), a
// retained rule read absent is kept; after it, absent is a delete.
func TestMessagesReadAfterTheLossResyncDoNotDelete(t *testing.T) {
	r, src := resyncedWith(t, rulesAB)
	ctx := context.Background()
	r.Flush()
	if err := src.fullResync(ctx, "epoch changed"); err != nil {
		t.Fatal(err)
	}
	if src.fence == "" {
		t.Fatal("no loss fence after the resync that found the data loss")
	}
	// A message from before the loss, taken now.
	src.queue.add(rulestore.RuleRef{Kind: rulestore.RateLimit, ID: "a"}, time.Now())
	if err := src.flushPending(ctx); err != nil {
		t.Fatal(err)
	}
	if src.snapshot().Get(rulestore.RateLimit, "a") == nil {
		t.Fatal("rule a deleted by a message read before the loss fence's pong")
	}
	// The pong: messages from now on were published after the loss was
	// found, and a rule read absent is deleted.
	src.onPong("another payload")
	if src.fence == "" {
		t.Fatal("the fence ended on a pong that was not its own")
	}
	src.onPong(src.fence)
	src.queue.add(rulestore.RuleRef{Kind: rulestore.RateLimit, ID: "b"}, time.Now())
	if err := src.flushPending(ctx); err != nil {
		t.Fatal(err)
	}
	if src.snapshot().Get(rulestore.RateLimit, "b") != nil {
		t.Fatal("rule b kept after its deliberate delete past the fence")
	}
	if src.snapshot().Get(rulestore.RateLimit, "a") == nil {
		t.Fatal("rule a dropped")
	}
}

func TestChangeLogCatchesMissedPublish(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, redisStore(r.URL()))
	in.WaitLog("resynced rules from redis")
	ctx := context.Background()
	// A writer that appends to the change log but whose PUBLISH was lost.
	c.HSet(ctx, "rate_limit:rule:via_stream", "qps", "8")
	c.XAdd(ctx, &redis.XAddArgs{Stream: "gateway:rules", MaxLen: 10000, Approx: true,
		Values: map[string]any{"type": "rate_limit", "id": "via_stream", "op": "upsert"}})
	in.waitQPS("via_stream", "8")
}

func TestReloadKeepsFollowingAndMovesOnAddressChange(t *testing.T) {
	r1 := redistest.Start(t)
	r2 := redistest.Start(t)
	in := runStore(t, redisStore(r1.URL()))
	push(t, r1.Client(), "a", "qps", "1")
	in.waitQPS("a", "1")

	// Same settings, other static rules: the subscription carries on.
	same := redisStore(r1.URL())
	same["rate_limit"] = map[string]any{"s": map[string]any{"qps": 5}}
	in.Reload(same)
	push(t, r1.Client(), "a", "qps", "2")
	in.waitQPS("a", "2")
	in.waitQPS("s", "5")

	in.Reload(redisStore(r2.URL()))
	push(t, r2.Client(), "b", "qps", "3")
	in.waitQPS("b", "3")
	in.waitQPS("a", "") // r2 has no rule a
}

func TestPrefixNamespacesEverything(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	st := redisStore(r.URL())
	st["prefix"] = "tenant1:"
	in := runStore(t, st)
	ctx := context.Background()
	push(t, c, "other", "qps", "1") // unprefixed: another namespace
	c.HSet(ctx, "tenant1:rate_limit:rule:mine", "qps", "2")
	c.Publish(ctx, "tenant1:gateway:rules:rate_limit", "mine")
	in.waitQPS("mine", "2")
	if _, ok := in.rule("rate_limit", "other"); ok {
		t.Fatal("an unprefixed rule leaked into the prefixed store")
	}
}

func TestBindingsFollowRedis(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, redisStore(r.URL()))
	ctx := context.Background()
	c.HSet(ctx, "gateway:binding:order_route", "rate_limit", "order_api", "gray", "a, b")
	c.Publish(ctx, "gateway:rules:binding", "order_route")
	testcaddy.Eventually(t, 10*time.Second, "binding", func() bool {
		v, ok := in.rule("binding", "order_route")
		return ok && v.Fields["rate_limit"] == "order_api"
	})
	app := inProcessApp(t)
	b := app.Route("order_route")
	if b == nil || b.RateLimit != "order_api" || strings.Join(b.Gray, ",") != "a,b" {
		t.Fatalf("binding = %+v", b)
	}
}

func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	ctx := context.Background()
	// Written before the store starts, spread over slots on every master.
	for i := 0; i < 30; i++ {
		if err := c.HSet(ctx, fmt.Sprintf("rate_limit:rule:r%d", i), "qps", "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	in := runStore(t, map[string]any{"redis": map[string]any{"addrs": cl.Addrs(), "cluster": true}})
	defer func() {
		if t.Failed() {
			t.Log(in.Logs())
		}
	}()
	testcaddy.Eventually(t, 15*time.Second, "30 rules loaded from every master", func() bool {
		return in.status().Rules["rate_limit"] == 30
	})
	push(t, c, "r7", "qps", "9")
	in.waitQPS("r7", "9")
}

func inProcessApp(t testing.TB) *rulestore.App {
	v, err := caddy.ActiveContext().AppIfConfigured("rulestore")
	if err != nil {
		t.Fatal(err)
	}
	return v.(*rulestore.App)
}

func TestFieldsJSONAcceptsNumbersAndBools(t *testing.T) {
	var f rulestore.Fields
	if err := json.Unmarshal([]byte(`{"qps": 100, "shadow": true, "key_resolver": "userId", "burst": 1.5}`), &f); err != nil {
		t.Fatal(err)
	}
	want := rulestore.Fields{"qps": "100", "shadow": "true", "key_resolver": "userId", "burst": "1.5"}
	if !f.Equal(want) {
		t.Fatalf("got %v", f)
	}
	if err := json.Unmarshal([]byte(`{"qps": [1]}`), &f); err == nil {
		t.Fatal("array value accepted")
	}
}

func TestValidID(t *testing.T) {
	for _, ok := range []string{"order_api", "a.b-c:d", "X1"} {
		if err := rulestore.ValidID(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a/b", "*", strings.Repeat("a", rulestore.MaxIDLength+1), "é"} {
		if err := rulestore.ValidID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

var _ = bytes.NewReader

var nopLogger = zap.NewNop()

// startStore provisions and starts a store without Caddy around it.
func startStore(t testing.TB, app *rulestore.App) *rulestore.App {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := app.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	app.Start()
	t.Cleanup(func() { app.Cleanup() })
	return app
}

// startBenchStore is startStore with a silent log, so benchmark output
// stays parseable (the store logs every rule update).
func startBenchStore(b *testing.B, url string) *rulestore.App {
	app := &rulestore.App{Redis: &redisconf.Config{URL: url}, Resync: syntax.Duration(time.Hour)}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	if err := app.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	app.Source().(*redisSource).logger = nopLogger
	app.Start()
	b.Cleanup(func() { app.Cleanup() })
	return app
}

func TestMetrics(t *testing.T) {
	r := redistest.Start(t)
	st := redisStore(r.URL())
	st["rate_limit"] = map[string]any{"s": map[string]any{"qps": 1}}
	in := runStore(t, st)
	push(t, r.Client(), "a", "qps", "1")
	push(t, r.Client(), "bad", "qps", "zero")
	in.waitQPS("a", "1")
	in.WaitLog("rule rejected")
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/metrics", in.Admin))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`sluice_rulestore_rules{kind="rate_limit",source="redis"} 1`,
		`sluice_rulestore_rules{kind="rate_limit",source="static"} 1`,
		`sluice_rulestore_redis_connected 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// The bad rule may be seen twice (its message and the first load).
	if strings.Contains(string(body), "sluice_rulestore_rejected_total 0") ||
		!strings.Contains(string(body), "sluice_rulestore_rejected_total ") {
		t.Errorf("rejected_total missing or 0")
	}
}

// redisClients counts the connections a Redis server has, less the one
// asking.
func redisClients(t *testing.T, c *redis.Client) int {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(strings.TrimSpace(list), "\n")
}

func TestReloadsLeakNothing(t *testing.T) {
	r1 := redistest.Start(t)
	r2 := redistest.Start(t)
	c1, c2 := r1.Client(), r2.Client()
	in := runStore(t, redisStore(r1.URL()))
	push(t, c1, "a", "qps", "1")
	in.waitQPS("a", "1")
	// Measure once the first generation has settled.
	goroutines := testcaddy.Settled(t, 20*time.Second, "goroutines", runtime.NumGoroutine)
	conns := testcaddy.Settled(t, 20*time.Second, "redis connections", func() int { return redisClients(t, c1) })

	for i := 0; i < 20; i++ {
		url := r1.URL()
		if i%2 == 1 {
			url = r2.URL() // alternate between two Redis servers
		}
		st := redisStore(url)
		st["rate_limit"] = map[string]any{fmt.Sprintf("s%d", i): map[string]any{"qps": 1}}
		in.Reload(st)
	}
	in.Reload(redisStore(r1.URL()))
	push(t, c1, "a", "qps", "2")
	in.waitQPS("a", "2")

	testcaddy.Eventually(t, 10*time.Second, "goroutines and connections back to their level", func() bool {
		return runtime.NumGoroutine() <= goroutines+5 && redisClients(t, c1) <= conns && redisClients(t, c2) == 0
	})
}

func TestLiveInstancesCountsHeartbeats(t *testing.T) {
	r := redistest.Start(t)
	a := startStore(t, &rulestore.App{Redis: &redisconf.Config{URL: r.URL()}, Resync: syntax.Duration(time.Hour)})
	// Another instance: other settings give it a source of its own.
	b := startStore(t, &rulestore.App{Redis: &redisconf.Config{URL: r.URL()}, Resync: syntax.Duration(time.Minute)})
	testcaddy.Eventually(t, 10*time.Second, "both instances see 2 live instances", func() bool {
		return a.LiveInstances() == 2 && b.LiveInstances() == 2
	})
	// Another prefix is another fleet.
	c := startStore(t, &rulestore.App{Redis: &redisconf.Config{URL: r.URL()}, Prefix: "other:"})
	testcaddy.Eventually(t, 10*time.Second, "heartbeat of the other fleet", func() bool {
		n, _ := r.Client().ZCard(context.Background(), "other:gateway:instances").Result()
		return n == 1
	})
	if c.LiveInstances() != 1 {
		t.Fatalf("other fleet counts %d instances", c.LiveInstances())
	}
}

// resyncSource starts a Redis and a source on it with a resync period of
// an hour: the test runs the resyncs itself.
// resyncedWith is resyncSource after these hashes (key: field, value
// pairs) were written and a first resync took them.
func resyncedWith(t *testing.T, hashes map[string][]any) (*redistest.Server, *redisSource) {
	t.Helper()
	r, src := resyncSource(t)
	ctx := context.Background()
	for key, fields := range hashes {
		if err := r.Client().HSet(ctx, key, fields...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.fullResync(ctx, "connected"); err != nil {
		t.Fatal(err)
	}
	return r, src
}

// rulesAB are rate_limit rules a and b.
var rulesAB = map[string][]any{"rate_limit:rule:a": {"qps", "1"}, "rate_limit:rule:b": {"qps", "1"}}

func resyncSource(t *testing.T) (*redistest.Server, *redisSource) {
	t.Helper()
	r := redistest.Start(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // no local rule snapshot of another test
	rs, err := acquireSource(rulestore.RedisSourceConfig{Redis: &redisconf.Config{URL: r.URL()}, Resync: time.Hour, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	src := rs.(*redisSource)
	t.Cleanup(func() { sources.Delete(src.poolKey) })
	return r, src
}
