package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/rulestore"
)

// testBackend is a Redis for cluster engines outside Caddy.
type testBackend struct {
	c         redis.UniversalClient
	instances int
	states    sync.Map
}

func (b *testBackend) ClientState(key string, newValue func(redis.UniversalClient) any) any {
	if v, ok := b.states.Load(key); ok {
		return v
	}
	v, _ := b.states.LoadOrStore(key, newValue(b.c))
	return v
}

// gateOf is the health gate the limiters of backend b share.
func gateOf(b Backend) *cluster.Gate {
	return b.ClientState(cluster.GateKey, cluster.NewGate).(*cluster.Gate)
}

func (b *testBackend) Client() redis.UniversalClient { return b.c }
func (b *testBackend) KeyPrefix() string             { return "t:" }
func (b *testBackend) LiveInstances() int            { return b.instances }

// newTestClient is configured as the rule store configures its client.
func newTestClient(t testing.TB, addrs ...string) redis.UniversalClient {
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, ContextTimeoutEnabled: true,
		MaxRetries: 1, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// instance is one simulated Caddy instance: its own limiter for the rule.
func instance(t testing.TB, b Backend, id string) *limiter {
	l := newLimiter(id, nil)
	l.setBackend(b, nil)
	t.Cleanup(func() { l.Destruct() })
	return l
}

func take(l *limiter, r *Rule, key string) Decision {
	d := l.engine(r).Take(r, []byte(key), l.now())
	l.engine(r).Release(&d)
	return d
}

func clusterRule(t testing.TB, f rulestore.Fields) *Rule {
	f["scope"] = "cluster"
	f["redis_timeout"] = "1s" // this test is about counting, not timing
	return mustRule(t, f)
}

// Two instances spend one token bucket: exactly burst requests pass across
// both, with the cluster-wide remaining count, then a true Retry-After.
func TestClusterTokenBucketSharedBurst(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	r := clusterRule(t, rulestore.Fields{"qps": "0.01", "burst": "10", "key_resolver": "global"})
	a, c := instance(t, b, "tb"), instance(t, b, "tb")
	for i := 0; i < 10; i++ {
		l := a
		if i%2 == 1 {
			l = c
		}
		d := take(l, r, "global")
		if !d.OK() || d.Remaining != int64(9-i) {
			t.Fatalf("request %d: %+v, want allowed with %d remaining", i+1, d, 9-i)
		}
	}
	for _, l := range []*limiter{a, c} {
		d := take(l, r, "global")
		if d.OK() || d.Reason != RateLimited || d.RetryAfter < 90*time.Second.Nanoseconds() || d.RetryAfter > 100*time.Second.Nanoseconds() {
			t.Fatalf("after the burst: %+v, want rate limited with a retry of about 100s", d)
		}
	}
	// Another key has its own bucket; the key in Redis has a TTL.
	if d := take(a, r, "other"); !d.OK() {
		t.Fatalf("other key: %+v", d)
	}
	ttl := srv.Client().PTTL(context.Background(), "t:ratelimit:tb2:{"+r.ID+":global}").Val()
	if ttl <= 0 || ttl > 1001*time.Second {
		t.Fatalf("TTL of the bucket key: %v, want about 1001s (burst/qps + 1s)", ttl)
	}
}

// The sliding window in Redis admits the window's limit across instances,
// and the remaining count and reset follow the window.
func TestClusterSlidingWindowShared(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	r := clusterRule(t, rulestore.Fields{"limit_type": "sliding_window", "qps": "0.1", "window_size": "100", "key_resolver": "global"})
	a, c := instance(t, b, "sw"), instance(t, b, "sw")
	for i := 0; i < 10; i++ {
		l := a
		if i%2 == 1 {
			l = c
		}
		if d := take(l, r, "global"); !d.OK() || d.Remaining != int64(9-i) || d.Reset <= 0 || d.Reset > 100*time.Second.Nanoseconds() {
			t.Fatalf("request %d: %+v", i+1, d)
		}
	}
	if d := take(c, r, "global"); d.OK() || d.RetryAfter <= 0 {
		t.Fatalf("11th: %+v, want refused with a retry", d)
	}
	ttl := srv.Client().PTTL(context.Background(), "t:ratelimit:sw2:{"+r.ID+":global}").Val()
	if ttl <= 200*time.Second || ttl > 201*time.Second {
		t.Fatalf("TTL %v, want about 201s (two windows + 1s)", ttl)
	}
}

// Sliding window accuracy across two instances in real time: steady
// traffic at twice the limit for 3 windows admits about the limit per
// window, within the counter's error.
func TestClusterSlidingWindowAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	r := clusterRule(t, rulestore.Fields{"limit_type": "sliding_window", "qps": "100", "window_size": "0.5", "key_resolver": "global"})
	insts := []*limiter{instance(t, b, "acc"), instance(t, b, "acc")}
	const run = 1500 * time.Millisecond
	var mu sync.Mutex
	var admitted []time.Time
	var attempts atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for _, l := range insts {
		wg.Add(1)
		go func(l *limiter) {
			defer wg.Done()
			tick := time.NewTicker(5 * time.Millisecond) // 200/s per instance, 400/s in all
			defer tick.Stop()
			for now := range tick.C {
				if now.Sub(start) > run {
					return
				}
				attempts.Add(1)
				if d := take(l, r, "global"); d.OK() {
					mu.Lock()
					admitted = append(admitted, time.Now())
					mu.Unlock()
				}
			}
		}(l)
	}
	wg.Wait()
	elapsed := time.Since(start)
	// 50 per 0.5 s window: about 100 per second, plus up to one window's
	// limit at the start (the first fixed window starts full). The floor
	// needs the demand to be there: on a busy box the tickers drop ticks
	// and each take waits on Redis, so half the attempts (the demand is
	// twice the limit) is the floor when fewer were made.
	rate := 100 * elapsed.Seconds()
	floor := 0.8 * min(rate, float64(attempts.Load())/2)
	got := float64(len(admitted))
	t.Logf("admitted %v of %d attempts in %v, want %.0f to %.0f", got, attempts.Load(), elapsed, floor, 50+rate*1.05)
	if got > 50+rate*1.05 || got < floor {
		t.Fatalf("admitted %v of %d attempts in %v, want %.0f to %.0f", got, attempts.Load(), elapsed, floor, 50+rate*1.05)
	}
	// No trailing window of 0.5 s holds more than twice the limit (the
	// counter's worst case), and in practice not much over the limit.
	worst := 0
	for i := range admitted {
		j := i
		for j < len(admitted) && admitted[j].Sub(admitted[i]) < 500*time.Millisecond {
			j++
		}
		worst = max(worst, j-i)
	}
	t.Logf("fullest 0.5 s window: %d (limit 50)", worst)
	if worst > 100 {
		t.Fatalf("a 0.5 s window held %d, more than twice the limit 50", worst)
	}
}

// After SCRIPT FLUSH (as after a Redis restart) EVALSHA answers NOSCRIPT;
// the engine reloads the script and the decision still comes from Redis.
func TestClusterScriptReloadAfterFlush(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	for _, typ := range []string{"token_bucket", "sliding_window"} {
		r := clusterRule(t, rulestore.Fields{"limit_type": typ, "qps": "3", "key_resolver": "global"})
		l := instance(t, b, "flush-"+typ)
		if d := take(l, r, "k"); !d.OK() || d.Remaining != 2 {
			t.Fatalf("%s: first: %+v", typ, d)
		}
		if err := srv.Client().ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		calls := counterValue(l.counters.redisCalls)
		if d := take(l, r, "k"); !d.OK() || d.Remaining != 1 || counterValue(l.counters.redisCalls) != calls+1 {
			t.Fatalf("%s: after SCRIPT FLUSH: %+v, want allowed by Redis with 1 left", typ, d)
		}
		if gateOf(b).Down.Load() {
			t.Fatalf("%s: NOSCRIPT brought the gate down", typ)
		}
	}
}

// Lease mode: a quick burst across two instances never exceeds the burst
// (leases hand out only what Redis holds); under the quota one Redis call
// serves many requests; and over time the fleet admits at most
// quota + lease_size × instances.
func TestClusterLeaseBound(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	r := clusterRule(t, rulestore.Fields{"qps": "0.01", "burst": "20", "key_resolver": "global", "lease_size": "5"})
	a, c := instance(t, b, "lease"), instance(t, b, "lease")
	// A top-up runs in the background: on a busy machine it may land after
	// the 60th request, its tokens then held but not yet spent. So the
	// requests go on (to a deadline) until the burst is spent, and then
	// 20 more must all be refused: exactly 20 in all, never a 21st.
	n, i := 0, 0
	next := func() {
		l := a
		if i%3 == 0 {
			l = c
		}
		i++
		if d := take(l, r, "global"); d.OK() {
			n++
		}
	}
	for deadline := time.Now().Add(10 * time.Second); i < 60 || n < 20 && time.Now().Before(deadline); {
		next()
	}
	for range 20 {
		next()
	}
	if n != 20 {
		t.Fatalf("admitted %d of a burst of 20 with leases over %d requests, want exactly 20", n, i)
	}

	// Under the quota: lease 20 is topped up (by about 11 tokens) once it
	// falls below half, so ideally one call per ~11 requests. A top-up runs
	// in the background; if it lags, a request takes its own token in one
	// more call, which the in-flight top-up very likely beats (measured:
	// about 1 call per 6 requests). The bound, one call per 3 requests,
	// leaves twice that for lag on a busy machine while still failing if
	// leases did not serve several requests per call.
	r = clusterRule(t, rulestore.Fields{"qps": "100000", "burst": "100000", "key_resolver": "global", "lease_size": "20"})
	under := []*limiter{instance(t, b, "lease_under"), instance(t, b, "lease_under")}
	const requests = 400
	// Each instance counts its own Redis calls: the fleet's are the sum.
	fleetCalls := func() float64 {
		return counterValue(under[0].counters.redisCalls) + counterValue(under[1].counters.redisCalls)
	}
	callsBefore := fleetCalls()
	for i := 0; i < requests; i++ {
		// Its own key: "global" was drained by the burst above (same rule
		// id, so the same Redis key), and from near empty leases of 20
		// can find it empty for a few µs, refusing legitimately.
		if d := take(under[i%2], r, "under"); !d.OK() {
			t.Fatalf("request %d under the quota refused: %+v", i+1, d)
		}
	}
	underCalls := fleetCalls() - callsBefore
	t.Logf("under the quota: %d requests with %v Redis calls (lease 20)", requests, underCalls)
	if underCalls > requests/3 {
		t.Fatalf("%d requests under the quota made %v Redis calls with lease 20, want at most %d", requests, underCalls, requests/3)
	}

	if testing.Short() {
		return
	}
	// Refilling: qps 50, burst 10, lease 5, two instances hammering for 2 s.
	r = clusterRule(t, rulestore.Fields{"qps": "50", "burst": "10", "key_resolver": "global", "lease_size": "5"})
	insts := []*limiter{instance(t, b, "lease2"), instance(t, b, "lease2")}
	const run = 2 * time.Second
	start := time.Now()
	var total, attempts, calls int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, l := range insts {
		wg.Add(1)
		go func(l *limiter) {
			defer wg.Done()
			k, n := 0, 0
			for time.Since(start) < run {
				n++
				if d := take(l, r, "global"); d.OK() {
					k++
				}
				time.Sleep(200 * time.Microsecond) // sleep: paces the load (the test measures admissions, not speed)
			}
			mu.Lock()
			total += int64(k)
			attempts += int64(n)
			mu.Unlock()
		}(l)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	calls = int64(counterValue(insts[0].counters.redisCalls) + counterValue(insts[1].counters.redisCalls)) // each instance counts its own
	bound := 10 + 50*elapsed + 5*2
	t.Logf("admitted %d of %d in %.2fs with %d Redis calls; bound %.0f (burst 10 + 50/s + lease 5 × 2)", total, attempts, elapsed, calls, bound)
	if float64(total) > bound {
		t.Fatalf("admitted %d, over the lease bound %.0f", total, bound)
	}
	if float64(total) < 50*elapsed*0.8 {
		t.Fatalf("admitted %d, far under the quota %.0f", total, 50*elapsed)
	}
}

func counterValue(c *counter) float64 { return float64(c.Load()) }

// A reply error about a key (here OOM: Redis refuses the state's write)
// takes the failure path for that decision only: Redis is not marked down,
// so the next decision, once Redis accepts writes again, is decided in
// Redis at once.
func TestClusterReplyErrorDoesNotCloseGate(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "0.01", "burst": "1", "key_resolver": "global", "on_redis_error": "deny"})
	l := instance(t, b, "replyerror")
	srv.Client().ConfigSet(ctx, "maxmemory-policy", "noeviction")
	srv.Client().ConfigSet(ctx, "maxmemory", "1")
	if d := take(l, r, "bad"); d.Reason != RedisUnavailable {
		t.Fatalf("write refused by Redis: %+v, want the deny path", d)
	}
	if gateOf(b).Down.Load() {
		t.Fatal("a reply error marked Redis down")
	}
	srv.Client().ConfigSet(ctx, "maxmemory", "0")
	if d := take(l, r, "good"); !d.OK() || d.Unknown {
		t.Fatalf("next decision: %+v, want decided by Redis", d)
	}
	if d := take(l, r, "good"); d.Reason != RateLimited {
		t.Fatalf("second request: %+v, want rate limited by Redis (burst 1)", d)
	}
}

// In-flight caps of a cluster rule are per instance and checked before
// Redis; a refused request spends no token in Redis.
func TestClusterInFlightCapsStayLocal(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "0.01", "burst": "5", "key_resolver": "global", "max_concurrent": "1"})
	a, c := instance(t, b, "inflight"), instance(t, b, "inflight2")
	e := a.engine(r)
	held := e.Take(r, []byte("k"), a.now())
	if !held.OK() || held.Remaining != 4 {
		t.Fatalf("first: %+v", held)
	}
	if d := e.Take(r, []byte("k"), a.now()); d.Reason != TooManyInFlight {
		t.Fatalf("second while the first is in flight: %+v, want TooManyInFlight", d)
	}
	// Another instance has its own slots but the same Redis quota: the
	// refused request above spent nothing.
	if d := take(c, r, "k"); !d.OK() || d.Remaining != 3 {
		t.Fatalf("other instance: %+v, want allowed with 3 left in Redis", d)
	}
	e.Release(&held)
	if d := take(a, r, "k"); !d.OK() || d.Remaining != 2 {
		t.Fatalf("after release: %+v, want allowed with 2 left", d)
	}
}

// A refusal is remembered until Redis said tokens would be back, so a flood
// of refused requests does not reach Redis; a changed rule forgets it.
func TestClusterRefusalIsRemembered(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "0.01", "burst": "2", "key_resolver": "global"})
	l := instance(t, b, "remember")
	for i := 0; i < 2; i++ {
		if d := take(l, r, "k"); !d.OK() {
			t.Fatalf("request %d: %+v", i+1, d)
		}
	}
	calls := counterValue(l.counters.redisCalls)
	for i := 0; i < 100; i++ {
		if d := take(l, r, "k"); d.Reason != RateLimited || d.RetryAfter < 90*time.Second.Nanoseconds() {
			t.Fatalf("refused request %d: %+v, want rate limited with a retry of about 100s", i+1, d)
		}
	}
	if got := counterValue(l.counters.redisCalls) - calls; got != 0 {
		t.Fatalf("%v Redis calls for 100 refusals, want 0 (the wait was known)", got)
	}
	// The rule changes: Redis is asked again at once (and a faster refill
	// has brought a token back).
	r2 := clusterRule(t, rulestore.Fields{"qps": "1000", "burst": "2", "key_resolver": "global"})
	time.Sleep(2 * time.Millisecond) // sleep: at least two tokens come back at 1000/s (burst 2 caps a longer pause)
	if d := take(l, r2, "k"); !d.OK() || counterValue(l.counters.redisCalls) != calls+1 {
		t.Fatalf("after the rule changed: %+v, want allowed by Redis", d)
	}
}

// Concurrent requests read the clock before their Redis calls answer, in
// any order: an answer with tokens left must not make a request whose
// clock reading came earlier look refused (a bug found under wrk).
func TestClusterEarlierClockReadingIsNotRefused(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "1e9", "key_resolver": "global"})
	e := instance(t, b, "clock").engine(r)
	if d := e.Take(r, []byte("k"), 10*sec); !d.OK() {
		t.Fatalf("first: %+v", d)
	}
	if d := e.Take(r, []byte("k"), 5*sec); !d.OK() {
		t.Fatalf("a request whose clock reading came earlier: %+v, want allowed (qps 1e9)", d)
	}
}

// A key's state is one string of packed numbers with its TTL. A key of
// another type at its name (here a hash shaped like the earlier format's,
// which lived at other names: cluster_upgrade_test.go) is replaced: the
// key's quota starts afresh and is counted in Redis from then on, with no
// error and no fallback.
func TestClusterStateReplacesKeyOfAnotherType(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	for _, tc := range []struct {
		engine string
		fields rulestore.Fields
		old    []any
	}{
		{"tb2", rulestore.Fields{"qps": "0.01", "burst": "2", "key_resolver": "global"}, []any{"t", 1, "n", 0}},
		{"sw2", rulestore.Fields{"qps": "0.002", "window_size": "1000s", "limit_type": "sliding_window", "key_resolver": "global"}, []any{"s", 0, "c", 2, "p", 0}},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			r := clusterRule(t, tc.fields)
			key := "t:ratelimit:" + tc.engine + ":{" + r.ID + ":global}"
			srv.Client().HSet(ctx, key, tc.old...)
			l := instance(t, b, "replace-"+tc.engine)
			for i := range 2 {
				if d := take(l, r, "global"); !d.OK() || d.Unknown {
					t.Fatalf("request %d over the hash: %+v, want admitted by Redis", i+1, d)
				}
			}
			if d := take(l, r, "global"); d.Reason != RateLimited || d.Unknown {
				t.Fatalf("third request: %+v, want rate limited by Redis (quota 2)", d)
			}
			if typ := srv.Client().Type(ctx, key).Val(); typ != "string" {
				t.Errorf("key type %q, want string", typ)
			}
			if ttl := srv.Client().PTTL(ctx, key).Val(); ttl <= 0 {
				t.Errorf("key TTL %v, want one", ttl)
			}
			if got := counterValue(l.counters.redisErrors); got != 0 {
				t.Errorf("%v Redis errors, want none", got)
			}
		})
	}
}
