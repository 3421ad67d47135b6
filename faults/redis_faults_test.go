package faults_test

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// chainConfig is the full chain on one route, rules bound by route name,
// plus a probe site on a rule that exists only in Redis. globals goes into
// the global block (admin, logging), redisURL is where the store connects.
type chainConfig struct {
	globals  string
	redisURL string
	gw, aux  int    // ports of the gateway and the probe site
	v1, v2   string // upstream addresses
	rules    string // more static rules in the rulestore block
	extra    string // more site blocks
	// readTimeout is the store's Redis read_timeout; 500ms when empty.
	readTimeout string
}

func (c chainConfig) String() string {
	return fmt.Sprintf(`{
	%s
	rulestore {
		redis {
			url           %s
			dial_timeout  500ms
			read_timeout  %s
			write_timeout 500ms
		}
		resync 30s
		rate_limit order_api {
			qps          100000
			burst        100000
			key_resolver userId
		}
		circuit_breaker order_cb {
			failure_threshold 5
			open_duration     1h
		}
		gray order_canary {
			match_tag        X-Canary
			match_value      true
			target_version   v2
			fallback_version v1
		}
		binding orders {
			rate_limit      order_api
			circuit_breaker order_cb
			gray            order_canary
		}
		%s
	}
}

http://127.0.0.1:%d {
	ratelimit {
		route orders
	}
	circuitbreaker {
		route orders
	}
	grayroute {
		route orders
	}
	header >X-Served-Version {http.grayroute.version}
	@v2 vars gray_version v2
	handle @v2 {
		reverse_proxy %s {
			transport http {
				keepalive 2s
			}
		}
	}
	handle {
		reverse_proxy %s {
			transport http {
				keepalive 2s
			}
		}
	}
}

http://127.0.0.1:%d {
	ratelimit probe
	respond "probe"
}
%s
`, c.globals, c.redisURL, cmp.Or(c.readTimeout, "500ms"), c.rules, c.gw, c.v2, c.v1, c.aux, c.extra)
}

// hold keeps a load phase running for d: the phase's length, not a wait
// for a condition.
func hold(d time.Duration) { time.Sleep(d) } // sleep: a load phase lasts d; nothing to wait on

// TestRedisFaultsUnderLoad runs the built Caddy binary with the full chain
// under steady load while Redis is partitioned away, paused (SIGSTOP),
// killed, restarted empty and flapping. Invariants: no failed request, no
// request slower than latencyBound, rule changes made during each outage in
// force once Redis is back, rules kept (and logged) when Redis lost its
// data, goroutines and Redis connections back to their level, no crash.
func TestRedisFaultsUnderLoad(t *testing.T) {
	r := redistest.Start(t)
	px := startProxy(t, r.Addr)
	c := testClient(t, r.Addr)
	cfg := chainConfig{
		globals:  "admin localhost:{{admin}}\n\tpersist_config off",
		redisURL: px.URL(),
		gw:       testcaddy.FreePort(t), aux: testcaddy.FreePort(t),
		v1: upstream(t, "v1"), v2: upstream(t, "v2"),
	}
	// Redis rules before Caddy starts: the Redis order_api overrides the
	// static one; probe exists only in Redis.
	push(t, c, "rate_limit", "order_api", "qps", "50000", "burst", "50000", "key_resolver", "userId")
	push(t, c, "rate_limit", "probe", "qps", "100000", "burst", "100000", "key_resolver", "userId")
	push(t, c, "rate_limit", "doomed", "qps", "1")
	// Redis versions of the chain's breaker and gray rule (same behaviour),
	// to see them kept when Redis loses its data.
	push(t, c, "circuit_breaker", "order_cb", "failure_threshold", "6", "open_duration", "1h")
	push(t, c, "gray", "order_canary", "match_tag", "X-Canary", "match_value", "true", "target_version", "v2", "fallback_version", "v1")
	p := testcaddy.Start(t, cfg.String())
	admin := p.AdminPort
	waitRule(t, admin, "rate_limit", "order_api", map[string]string{"qps": "50000"})
	waitRule(t, admin, "rate_limit", "probe", map[string]string{"burst": "100000"})
	waitRule(t, admin, "circuit_breaker", "order_cb", map[string]string{"failure_threshold": "6"})
	testcaddy.Eventually(t, 10*time.Second, "store connected", func() bool { return adminStore(t, admin).Connected })
	base := fmt.Sprintf("http://127.0.0.1:%d", cfg.gw)
	probeURL := fmt.Sprintf("http://127.0.0.1:%d/", cfg.aux)
	rate := pick(300, 400)

	// Warm up (connections to the upstreams, lazily built state), then take
	// the baseline with no load running.
	warm := startLoad(t, rate, 8, chainRequest(base))
	warm.waitSent(t, 300)
	warm.stopLoad()
	baseG := testcaddy.Settled(t, 20*time.Second, "caddy goroutines", func() int { return processGoroutines(t, admin) })
	baseConns := testcaddy.Settled(t, 20*time.Second, "redis connections", func() int { return sluiceClients(t, c) })
	t.Logf("RESULT baseline: caddy goroutines=%d redis connections=%d", baseG, baseConns)

	l := startLoad(t, rate, 8, chainRequest(base))
	outages := 0
	l.setPhase("baseline")
	hold(phaseDur)

	// 1. Partition: Redis is up and written to, Caddy cannot reach it.
	l.setPhase("partitioned")
	px.Cut()
	outages++
	testcaddy.Eventually(t, 10*time.Second, "store sees the partition", func() bool { return !adminStore(t, admin).Connected })
	push(t, c, "rate_limit", "probe", "qps", "0.001", "burst", "2", "key_resolver", "userId")
	push(t, c, "rate_limit", "created1", "qps", "7")
	del(t, c, "rate_limit", "doomed")
	hold(phaseDur)
	if v, _ := adminRule(t, admin, "rate_limit", "probe"); v.Fields["burst"] != "100000" {
		t.Errorf("a change reached Caddy through a partition: probe burst %q", v.Fields["burst"])
	}
	px.Heal()
	waitRule(t, admin, "rate_limit", "probe", map[string]string{"burst": "2"})
	waitRule(t, admin, "rate_limit", "created1", map[string]string{"qps": "7"})
	waitRule(t, admin, "rate_limit", "doomed", nil)
	probeStatuses(t, probeURL, "p1", 200, 200, 429)

	// 2. Paused (SIGSTOP): connections stay open, commands hang. A writer
	// queues changes that Redis executes when it resumes.
	l.setPhase("paused")
	r.Pause()
	outages++
	writer := redis.NewClient(&redis.Options{Addr: r.Addr, ClientName: "faults-test", ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1})
	defer writer.Close()
	written := asyncPush(writer, "rate_limit", "probe", "qps", "0.001", "burst", "3", "key_resolver", "userId")
	writtenToo := asyncPush(writer, "rate_limit", "created2", "qps", "8")
	// The admin API never waits on Redis: a call that did would hang until
	// the resume below and fail on adminHTTP's 5 s timeout first. The 1 s
	// bound leaves a memory read on a busy 2-core machine under the race
	// detector a wide margin (it takes milliseconds), and still catches a
	// call that waited on Redis's 500 ms timeouts more than once.
	start := time.Now()
	adminStore(t, admin)
	adminTook := time.Since(start)
	t.Logf("RESULT admin /sluice/store answered in %v with Redis paused", adminTook)
	if adminTook > time.Second {
		t.Errorf("admin /sluice/store took %v with Redis paused: it waited on Redis", adminTook)
	}
	hold(phaseDur)
	r.Resume()
	for _, ch := range []chan error{written, writtenToo} {
		if err := <-ch; err != nil {
			t.Fatalf("write during pause: %v", err)
		}
	}
	waitRule(t, admin, "rate_limit", "probe", map[string]string{"burst": "3"})
	waitRule(t, admin, "rate_limit", "created2", map[string]string{"qps": "8"})
	probeStatuses(t, probeURL, "p2", 200, 200, 200, 429)

	// 3. Killed, then restarted empty (no persistence): data lost.
	l.setPhase("killed")
	r.Kill()
	outages++
	testcaddy.Eventually(t, 10*time.Second, "store sees Redis gone", func() bool { return !adminStore(t, admin).Connected })
	hold(phaseDur)
	l.setPhase("restarted-empty")
	r.Restart()
	testcaddy.Eventually(t, 20*time.Second, "data loss logged", func() bool {
		return strings.Contains(p.Logs(), "redis lost its data")
	})
	testcaddy.Eventually(t, 10*time.Second, "store reconnected", func() bool { return adminStore(t, admin).Connected })
	// Documented: the store does not re-seed Redis from memory.
	if keys, _ := c.Keys(context.Background(), "rate_limit:rule:*").Result(); len(keys) != 0 {
		t.Errorf("Redis re-seeded after losing its data: %v", keys)
	}
	for id, qps := range map[string]string{"order_api": "50000", "probe": "0.001", "created1": "7", "created2": "8"} {
		v, ok := adminRule(t, admin, "rate_limit", id)
		if !ok || v.Source != "redis" || v.Fields["qps"] != qps {
			t.Errorf("after Redis lost its data, rule %s = %+v (held: %v), want the last Redis version kept", id, v, ok)
		}
	}
	if v, ok := adminRule(t, admin, "circuit_breaker", "order_cb"); !ok || v.Source != "redis" || v.Fields["failure_threshold"] != "6" {
		t.Errorf("after Redis lost its data, breaker rule order_cb = %+v, want the Redis version kept", v)
	}
	if v, ok := adminRule(t, admin, "gray", "order_canary"); !ok || v.Source != "redis" {
		t.Errorf("after Redis lost its data, gray rule order_canary = %+v, want the Redis version kept", v)
	}
	probeStatuses(t, probeURL, "p3", 200, 200, 200, 429) // still burst 3
	push(t, c, "rate_limit", "probe", "qps", "0.001", "burst", "4", "key_resolver", "userId")
	waitRule(t, admin, "rate_limit", "probe", map[string]string{"burst": "4"})
	hold(phaseDur)

	// 4. Flapping: partitions and pauses every ~150ms, a change made in
	// each outage.
	l.setPhase("flapping")
	end := time.Now().Add(phaseDur)
	cycles := 0
	for time.Now().Before(end) {
		cycles++
		id := "flap" + strconv.Itoa(cycles)
		if cycles%2 == 0 {
			px.Cut()
			push(t, c, "rate_limit", id, "qps", strconv.Itoa(cycles))
			push(t, c, "rate_limit", "flap", "qps", strconv.Itoa(cycles))
			hold(150 * time.Millisecond)
			px.Heal()
		} else {
			r.Pause()
			a := asyncPush(writer, "rate_limit", id, "qps", strconv.Itoa(cycles))
			b := asyncPush(writer, "rate_limit", "flap", "qps", strconv.Itoa(cycles))
			hold(150 * time.Millisecond)
			r.Resume()
			if err := <-a; err != nil {
				t.Fatal(err)
			}
			if err := <-b; err != nil {
				t.Fatal(err)
			}
		}
		outages++
		hold(150 * time.Millisecond)
	}
	waitRule(t, admin, "rate_limit", "flap", map[string]string{"qps": strconv.Itoa(cycles)})
	for i := 1; i <= cycles; i++ {
		waitRule(t, admin, "rate_limit", "flap"+strconv.Itoa(i), map[string]string{"qps": strconv.Itoa(i)})
	}
	t.Logf("RESULT flapping: %d outages in %v, all %d changes made during them in force", cycles, phaseDur, cycles)

	l.setPhase("recovered")
	testcaddy.Eventually(t, 10*time.Second, "store connected", func() bool { return adminStore(t, admin).Connected })
	hold(phaseDur)
	l.stopLoad()
	l.report(latencyBound, 0) // no reload: nothing closes a connection

	// Nothing leaked, nothing crashed.
	var g, conns, pooled int
	if !within(20*time.Second, func() bool {
		var ok bool
		g = processGoroutines(t, admin)
		conns, pooled, ok = redisConnsAccounted(t, c, admin)
		return g <= baseG+goroutineSlack && ok
	}) {
		t.Errorf("after the faults: caddy goroutines=%d (baseline %d), redis connections=%d (baseline %d, held by the store's client %d)\n%s\n%s",
			g, baseG, conns, baseConns, pooled, goroutineDump(t, admin), clientList(t, c))
	}
	t.Logf("RESULT after %d outages: caddy goroutines=%d (baseline %d), redis connections=%d (baseline %d, held by the store's client %d)", outages, g, baseG, conns, baseConns, pooled)
	logs := p.Logs()
	if strings.Contains(logs, "panic") {
		t.Errorf("Caddy logged a panic:\n%s", logs)
	}
	n := strings.Count(logs, "redis unavailable")
	t.Logf("RESULT %q logged %d times for %d outages", "redis unavailable", n, outages)
	if n > outages {
		t.Errorf("%q logged %d times for %d outages: once per outage expected", "redis unavailable", n, outages)
	}
}

// asyncPush writes a rule from another goroutine (the client blocks while
// Redis is paused) and reports the result on the channel.
func asyncPush(c *redis.Client, kind, id string, fields ...string) chan error {
	ch := make(chan error, 1)
	go func() {
		ctx := context.Background()
		args := make([]any, len(fields))
		for i, f := range fields {
			args[i] = f
		}
		pipe := c.TxPipeline()
		pipe.Del(ctx, kind+":rule:"+id)
		pipe.HSet(ctx, kind+":rule:"+id, args...)
		pipe.Publish(ctx, "gateway:rules:"+kind, id)
		_, err := pipe.Exec(ctx)
		ch <- err
	}()
	return ch
}

// probeStatuses sends requests as one user and checks their statuses.
func probeStatuses(t testing.TB, url, user string, want ...int) {
	t.Helper()
	var got []int
	for range want {
		resp, _ := testcaddy.Get(t, url, "X-User-Id: "+user)
		got = append(got, resp.StatusCode)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("user %s: statuses %v, want %v", user, got, want)
	}
}
