package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// fleetConfig is a Caddyfile for testcaddy.Start (admin {{admin}}) with the
// rule store on redisURL and one site per body on the given ports.
func fleetConfig(t testing.TB, redisGlobal string, ports []int, bodies ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin localhost:{{admin}}\n\tpersist_config off\n\tstorage file_system %s\n\trulestore {\n\t\t%s\n\t}\n}\n", t.TempDir(), redisGlobal)
	for i, body := range bodies {
		fmt.Fprintf(&b, "http://127.0.0.1:%d {\n%s\n}\n", ports[i], body)
	}
	return b.String()
}

func ports(t testing.TB, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = testcaddy.FreePort(t)
	}
	return out
}

func url(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

const burstSite = `
	ratelimit {
		qps 0.01
		burst 10
		key_resolver global
		scope %s
	}
	respond "ok"`

const leaseSite = `
	ratelimit {
		qps 0.01
		burst 10
		key_resolver global
		scope cluster
		lease_size 3
		redis_timeout 500ms
	}
	respond "ok"`

// clusterScope is burstSite's scope for the shared quota. The default
// redis_timeout (500ms; it was 50ms) could pass on a busy test machine at an instance's
// first script call, which then rightly follows on_redis_error: the
// failure modes have their own tests, so these give Redis 500ms.
const clusterScope = "cluster\n\t\tredis_timeout 500ms"

// Two Caddy processes sharing one Redis and one cluster rule admit exactly
// the burst in total for a quick burst spread over both, and show the
// cluster-wide remaining count; the same rule with scope local admits the
// burst on each. Lease mode admits exactly the burst too (leases hand out
// only what Redis holds).
func TestClusterQuotaSharedByTwoCaddys(t *testing.T) {
	rd := redistest.Start(t)
	p := ports(t, 3)
	q := ports(t, 3)
	sites := []string{fmt.Sprintf(burstSite, clusterScope), fmt.Sprintf(burstSite, "local"), leaseSite}
	a := testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), p, sites...))
	b := testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), q, sites...))
	_, _ = a, b

	// cluster: 10 in all, remaining counting down across both instances.
	var got []string
	admitted := 0
	for i := 0; i < 20; i++ {
		u := url(p[0])
		if i%2 == 1 {
			u = url(q[0])
		}
		resp, _ := testcaddy.Get(t, u)
		if resp.StatusCode == 200 {
			admitted++
			got = append(got, resp.Header.Get("X-RateLimit-Remaining"))
		} else if resp.StatusCode != 429 {
			t.Fatalf("cluster request %d: status %d", i+1, resp.StatusCode)
		}
	}
	if admitted != 10 || strings.Join(got, ",") != "9,8,7,6,5,4,3,2,1,0" {
		t.Fatalf("cluster: admitted %d with remaining %v, want exactly 10 counting down 9..0 across both instances", admitted, got)
	}
	// local: 10 on each.
	admitted = 0
	for i := 0; i < 30; i++ {
		u := url(p[1])
		if i%2 == 1 {
			u = url(q[1])
		}
		if status(t, u) == 200 {
			admitted++
		}
	}
	if admitted != 20 {
		t.Fatalf("local: admitted %d, want 20 (10 per instance)", admitted)
	}
	// lease: 10 in all.
	admitted = 0
	for i := 0; i < 30; i++ {
		u := url(p[2])
		if i%3 == 1 {
			u = url(q[2])
		}
		if status(t, u) == 200 {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("lease: admitted %d, want exactly 10", admitted)
	}
}

// Three instances (two processes and this one) with a cluster rule of 20
// per second, under traffic spread over them for 3 s: the total admitted is
// within a few percent of the quota; the same rule with scope local admits
// more than one quota (each instance has its own). redis_timeout is 500ms,
// pinned (it once defaulted to 50ms): under -race on a busy machine a healthy Redis call
// can take longer, and a timeout moves decisions to on_redis_error, which
// this test is not about.
func TestClusterRateAcrossThreeInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	rd := redistest.Start(t)
	site := `
	ratelimit {
		qps 20
		burst 5
		key_resolver global
		scope %s
	}
	respond "ok"`
	bodies := []string{fmt.Sprintf(site, "cluster\n\t\tredis_timeout 500ms"), fmt.Sprintf(site, "local")}
	var urls [][]string // [instance][site]
	for i := 0; i < 2; i++ {
		p := ports(t, 2)
		testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), p, bodies...))
		urls = append(urls, []string{url(p[0]), url(p[1])})
	}
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}", bodies...)
	testcaddy.Run(t, s.cfg)
	urls = append(urls, s.urls)

	for site, name := range []string{"cluster", "local"} {
		const run = 3 * time.Second
		var total int64
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for _, inst := range urls {
			wg.Add(1)
			go func(u string) {
				defer wg.Done()
				n := int64(0)
				tick := time.NewTicker(10 * time.Millisecond) // 100/s per instance
				defer tick.Stop()
				for range tick.C {
					if time.Since(start) > run {
						break
					}
					resp, err := http.Get(u)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode == 200 {
						n++
					}
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}(inst[site])
		}
		wg.Wait()
		sec := time.Since(start).Seconds()
		quota := 20*sec + 5 // rate plus the burst
		t.Logf("%s: admitted %d in %.2fs; one quota is %.0f", name, total, sec, quota)
		switch name {
		case "cluster":
			if float64(total) > quota*1.05 || float64(total) < quota*0.85 {
				t.Errorf("cluster: admitted %d, want %.0f within +5%%/-15%%", total, quota)
			}
		case "local":
			// Each instance has a quota of its own: together they admit
			// more than one quota and at most three. Not "about 3×": on a
			// busy machine an instance's client may send fewer requests
			// than its quota, which says nothing about the limiter.
			if float64(total) <= quota*1.05 || float64(total) > 3*quota*1.05 {
				t.Errorf("local: admitted %d, want more than one quota (%.0f) and at most three", total, quota)
			}
		}
	}
}

// timedGet sends a request with a keyed header and returns the response
// and how long it took.
func timedGet(t *testing.T, u, key string) (*http.Response, string, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, body := testcaddy.Get(t, u, "X-K: "+key)
	return resp, body, time.Since(start)
}

// Redis killed, then paused (SIGSTOP), then back: allow lets everything
// through, deny answers its status, local admits this instance's share of
// the quota (quota ÷ live instances); no request waits on a dead or hung
// Redis for much longer than redis_timeout (150ms here: the default 50ms can
// time out spuriously on a loaded test machine, which would move requests to
// the failure path early); and with Redis back the cluster quota is
// enforced again without restarting Caddy.
func TestClusterRedisFailureModes(t *testing.T) {
	rd := redistest.Start(t)
	site := `
	ratelimit {
		qps 0.01
		burst 4
		key_resolver {http.request.header.X-K}
		scope cluster
		on_redis_error %s
		redis_timeout 150ms
	}
	respond "ok"`
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}",
		fmt.Sprintf(site, "allow"), fmt.Sprintf(site, "deny 503"), fmt.Sprintf(site, "local"))
	allow, deny, local := s.urls[0], s.urls[1], s.urls[2]
	testcaddy.Run(t, s.cfg)

	// A second live instance (a heartbeat member as another Caddy writes
	// it), so the local share is half the quota. Wait until this instance's
	// own heartbeat has counted it.
	ctx := context.Background()
	c := rd.Client()
	testcaddy.Eventually(t, 10*time.Second, "first heartbeat", func() bool { return c.ZCard(ctx, "gateway:instances").Val() == 1 })
	self := c.ZRange(ctx, "gateway:instances", 0, 0).Val()[0]
	secondInstance := func() {
		t.Helper()
		before := c.ZScore(ctx, "gateway:instances", self).Val()
		c.ZAdd(ctx, "gateway:instances", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "other-caddy"})
		testcaddy.Eventually(t, 10*time.Second, "a heartbeat counting two instances", func() bool {
			return c.ZScore(ctx, "gateway:instances", self).Val() != before
		})
	}
	secondInstance()

	enforced := func(phase string) {
		t.Helper()
		testcaddy.Eventually(t, 5*time.Second, phase+": redis in use again", func() bool {
			resp, _ := testcaddy.Get(t, deny, "X-K: probe-"+phase)
			return resp.StatusCode == 200
		})
		for _, u := range []string{allow, deny, local} {
			for i := 0; i < 4; i++ {
				resp, _, _ := timedGet(t, u, phase)
				if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(3-i) {
					t.Fatalf("%s %s request %d: %d remaining %q, want 200 with %d", phase, u, i+1, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), 3-i)
				}
			}
			if resp, _, _ := timedGet(t, u, phase); resp.StatusCode != 429 {
				t.Fatalf("%s %s: 5th request %d, want 429", phase, u, resp.StatusCode)
			}
		}
	}
	// failing checks each mode while Redis is unreachable; key is fresh.
	failing := func(phase string) {
		t.Helper()
		var slowest time.Duration
		for i := 0; i < 6; i++ {
			resp, _, d := timedGet(t, allow, phase)
			slowest = max(slowest, d)
			if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "" {
				t.Fatalf("%s allow %d: %d remaining %q, want 200 without rate headers", phase, i+1, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
			}
		}
		for i := 0; i < 3; i++ {
			resp, body, d := timedGet(t, deny, phase)
			slowest = max(slowest, d)
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, `"error":"redis_unavailable"`) {
				t.Fatalf("%s deny: %d %q retry-after %q, want 503 redis_unavailable", phase, resp.StatusCode, body, resp.Header.Get("Retry-After"))
			}
		}
		// burst 4 ÷ 2 instances = 2 here.
		var codes []int
		for i := 0; i < 4; i++ {
			resp, _, d := timedGet(t, local, phase)
			slowest = max(slowest, d)
			codes = append(codes, resp.StatusCode)
			if i == 0 && resp.Header.Get("X-RateLimit-Limit") != "2" {
				t.Fatalf("%s local: X-RateLimit-Limit %q, want the share 2", phase, resp.Header.Get("X-RateLimit-Limit"))
			}
		}
		if fmt.Sprint(codes) != "[200 200 429 429]" {
			t.Fatalf("%s local: statuses %v, want [200 200 429 429] (a share of 2)", phase, codes)
		}
		t.Logf("%s: slowest request %v", phase, slowest)
		if slowest > time.Second {
			t.Fatalf("%s: a request took %v with Redis unreachable (redis_timeout 150ms)", phase, slowest)
		}
	}

	enforced("up")
	rd.Kill()
	failing("killed")
	rd.Restart()
	enforced("restarted")

	// Redis restarted empty: the other instance's heartbeat is gone until
	// it writes it again.
	secondInstance()
	rd.Pause()
	failing("paused")
	rd.Resume()
	enforced("resumed")

	m := metrics(t, s.adminPort)
	if v := metricValue(m, `sluice_ratelimit_redis_transitions_total{to="down"}`); v < 2 {
		t.Errorf("transitions to down = %v, want at least 2\n%s", v, grep(m, "sluice_ratelimit_redis"))
	}
	if !strings.Contains(m, `sluice_ratelimit_redis_fallback_total{mode="local"`) {
		t.Errorf("no fallback counts\n%s", grep(m, "sluice_ratelimit_redis"))
	}
}

// A real three-node Redis Cluster: the cluster rule counts in the node of
// each key's slot; every key gets exactly its burst.
func TestClusterOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	s := caddyfile(t, "\trulestore {\n\t\tredis {\n\t\t\taddrs "+strings.Join(cl.Addrs(), " ")+"\n\t\t\tcluster\n\t\t}\n\t}", `
	ratelimit {
		qps 0.01
		burst 3
		key_resolver {http.request.header.X-K}
		scope cluster
		redis_timeout 1s
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	for k := 0; k < 12; k++ {
		key := fmt.Sprintf("user-%d", k)
		expect(t, s.urls[0], []int{200, 200, 200, 429}, "X-K: "+key)
	}
	// The keys landed on more than one node.
	if used := cl.NodesHolding("ratelimit:tb2:*"); used < 2 {
		t.Fatalf("keys on %d node(s), want them spread over the cluster", used)
	}
}

// A cluster rule without Redis fails caddy validate at its line: inline
// (scope field), static (rule line), and the message says what to do.
func TestClusterWithoutRedisFailsValidate(t *testing.T) {
	s := caddyfile(t, "\trulestore {\n\t\trate_limit fleet {\n\t\t\tqps 10\n\t\t\tscope cluster\n\t\t}\n\t}",
		"\tratelimit {\n\t\trule fleet\n\t}\n\trespond \"ok\"")
	err := testcaddy.Validate(s.cfg)
	if err == nil || !strings.Contains(err.Error(), "Caddyfile:14") || !strings.Contains(err.Error(), "configure redis") {
		t.Fatalf("static cluster rule without redis: %v, want an error at Caddyfile:14 saying to configure redis", err)
	}
	// With Redis configured the same config is valid (Redis need not be up).
	s = caddyfile(t, "\trulestore {\n\t\tredis redis://127.0.0.1:1\n\t\trate_limit fleet {\n\t\t\tqps 10\n\t\t\tscope cluster\n\t\t}\n\t}",
		"\tratelimit {\n\t\trule fleet\n\t}\n\trespond \"ok\"")
	if err := testcaddy.Validate(s.cfg); err != nil {
		t.Fatalf("with redis: %v", err)
	}
}

// A cluster rule pushed through Redis: its counts live in Redis (deleting
// the bucket key gives the quota back at once).
func TestClusterRuleFromRedis(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	redistest.Push(t, c, "pfx:rate_limit:rule:fleet", "pfx:gateway:rules:rate_limit", "fleet",
		"qps", "0.01", "burst", "3", "key_resolver", "global", "scope", "cluster")
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t\tprefix pfx:\n\t}", "\tratelimit fleet\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	testcaddy.Eventually(t, 10*time.Second, "rule fleet loaded", func() bool { return limitHeader(t, s.urls[0]) == "3" })
	expect(t, s.urls[0], []int{200})
	key := "pfx:ratelimit:tb2:{fleet:global}"
	if n := c.Exists(context.Background(), key).Val(); n != 1 {
		t.Fatalf("bucket %s not in redis", key)
	}
	c.Del(context.Background(), key)
	expect(t, s.urls[0], []int{200, 200, 200, 429})
}

// Two Caddy processes under traffic while Redis is killed: before, key a
// spends the cluster burst of 10 across both; once Redis is gone, a new key
// b gets this instance's share on each (10 ÷ 2 live instances = 5) from
// memory, while key a, known to be spent until Redis said it refills,
// stays refused. No request fails or waits long.
func TestClusterLocalShareAcrossTwoCaddysWhenRedisDies(t *testing.T) {
	rd := redistest.Start(t)
	site := `
	ratelimit {
		qps 0.01
		burst 10
		key_resolver {http.request.header.X-K}
		scope cluster
		redis_timeout 150ms
	}
	respond "ok"`
	p, q := ports(t, 1), ports(t, 1)
	testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), p, site))
	testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), q, site))

	// Both instances must have counted two live instances: wait until each
	// has heartbeated again after both were registered.
	ctx := context.Background()
	c := rd.Client()
	testcaddy.Eventually(t, 15*time.Second, "two heartbeats", func() bool { return c.ZCard(ctx, "gateway:instances").Val() == 2 })
	first := c.ZRangeWithScores(ctx, "gateway:instances", 0, -1).Val()
	testcaddy.Eventually(t, 15*time.Second, "both instances heartbeat again", func() bool {
		for _, z := range first {
			if c.ZScore(ctx, "gateway:instances", z.Member.(string)).Val() == z.Score {
				return false
			}
		}
		return true
	})

	var mu sync.Mutex
	admitted := map[string]int{}  // by key
	fromShare := map[string]int{} // key b, by instance
	var slowest time.Duration
	// Each client sends key a, then pauses while Redis is killed (so no
	// request of key a meets an instance that has not yet seen it refused
	// with Redis gone), then sends key b until this instance refuses it
	// (its share spent), or the deadline.
	var phase atomic.Int32 // 0: key a, 1: pause, 2: key b
	parked := make(chan struct{}, 2)
	resume := make(chan struct{})
	defer func() {
		if phase.Load() != 2 {
			close(resume)
		}
	}()
	refused := map[string]int{} // by key, then key b by instance
	deadline := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	for _, u := range []string{url(p[0]), url(q[0])} {
		wg.Add(1)
		go func(u string) {
			defer wg.Done()
			for {
				if phase.Load() == 1 {
					parked <- struct{}{}
					<-resume
				}
				key := "a"
				if phase.Load() == 2 {
					key = "b"
				}
				mu.Lock()
				done := refused["b "+u] > 0
				mu.Unlock()
				if done {
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("%s: key b was not refused before the deadline", u)
					return
				}
				req, _ := http.NewRequest("GET", u, nil)
				req.Header.Set("X-K", key)
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				d := time.Since(start)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				slowest = max(slowest, d)
				switch resp.StatusCode {
				case 200:
					admitted[key]++
					if key == "b" && resp.Header.Get("X-RateLimit-Limit") == "5" {
						fromShare[u]++
					}
				case 429:
					refused[key]++
					if key == "b" {
						refused["b "+u]++
					}
				default:
					t.Errorf("%s: status %d", u, resp.StatusCode)
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // sleep: paces each client
			}
		}(u)
	}
	testcaddy.Eventually(t, 30*time.Second, "key a spent across both instances", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return admitted["a"] >= 10 && refused["a"] > 0
	})
	phase.Store(1)
	for range 2 {
		select {
		case <-parked:
		case <-time.After(30 * time.Second):
			t.Fatal("the clients did not pause before Redis was killed")
		}
	}
	rd.Kill()
	phase.Store(2)
	close(resume)
	wg.Wait()
	t.Logf("admitted by key %v, key b from the local share by instance %v; slowest request %v", admitted, fromShare, slowest)
	if admitted["a"] != 10 || admitted["b"] != 10 {
		t.Errorf("admitted %v, want a: 10 (the cluster burst), b: 10 (a share of 5 on each instance)", admitted)
	}
	for u, n := range fromShare {
		if n != 5 {
			t.Errorf("%s admitted %d from its local share, want 5 (burst 10 ÷ 2 live instances)", u, n)
		}
	}
	if len(fromShare) != 2 {
		t.Errorf("local shares used: %v, want both instances", fromShare)
	}
	if slowest > time.Second {
		t.Errorf("a request took %v while Redis died", slowest)
	}
}

// Concurrent requests on a cluster rule that never runs out are all
// admitted, with and without leases (answers arrive out of order).
func TestClusterConcurrentRequestsNeverSpuriouslyRefused(t *testing.T) {
	rd := redistest.Start(t)
	site := `
	ratelimit {
		qps 1000000000
		key_resolver global
		scope cluster
		redis_timeout 1s%s
	}
	respond "ok"`
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}", fmt.Sprintf(site, ""), fmt.Sprintf(site, "\n\t\tlease_size 50"))
	testcaddy.Run(t, s.cfg)
	for _, u := range s.urls {
		var wg sync.WaitGroup
		var bad atomic.Int64
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 100; i++ {
					resp, err := http.Get(u)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						bad.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if n := bad.Load(); n != 0 {
			t.Errorf("%s: %d of 800 concurrent requests refused by a rule that never runs out", u, n)
		}
	}
}
