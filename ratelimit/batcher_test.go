package ratelimit

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// concurrentTakes runs one decision per (instance, key, copy) all at once
// and counts the admitted ones per key.
func concurrentTakes(t *testing.T, ls []*limiter, r *Rule, keys []string, copies int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, l := range ls {
		for _, k := range keys {
			for range copies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					d := take(l, r, k)
					if d.Unknown {
						t.Errorf("key %s: decided without Redis: %+v", k, d)
					}
					if d.OK() {
						mu.Lock()
						admitted[k]++
						mu.Unlock()
					}
				}()
			}
		}
	}
	close(start)
	wg.Wait()
	return admitted
}

// patientClient is a client of Redis at addr whose reads and writes wait
// far longer than the tests' own waits: a batch must not fail while Redis
// is paused on a busy machine.
func patientClient(t *testing.T, addr string) redis.UniversalClient {
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true,
		MaxRetries: 1, DialTimeout: time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// batchStats is how many decisions and round trips a client's batcher sent.
func batchStats(l *limiter) (decisions, roundTrips int64) {
	g := gateOf(l.backend.Load().b)
	return g.batch.decisions.Load(), g.batch.roundTrips.Load()
}

// Many concurrent decisions on a quota of Q, from two instances sharing one
// Redis client each: exactly Q are admitted per key, for both engines, and
// they left in fewer round trips than decisions (they were batched).
func TestBatchedDecisionsAreExact(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name   string
		fields rulestore.Fields
	}{
		{"token_bucket", rulestore.Fields{"qps": "0.001", "burst": "25"}},
		{"sliding_window", rulestore.Fields{"qps": "0.025", "window_size": "1000s", "limit_type": "sliding_window"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b1 := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
			b2 := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
			tc.fields["key_resolver"] = "userId"
			r := clusterRule(t, tc.fields)
			r.RedisTimeout = 10 * time.Second // counting, not timing: a busy machine must not time out
			a, c := instance(t, b1, tc.name), instance(t, b2, tc.name)
			keys := []string{"alice", "bob", "carol", "dave"}
			got := concurrentTakes(t, []*limiter{a, c}, r, keys, 60)
			for _, k := range keys {
				if got[k] != 25 {
					t.Errorf("key %s: %d of 120 concurrent requests admitted, want exactly 25", k, got[k])
				}
			}
			n1, rt1 := batchStats(a)
			n2, rt2 := batchStats(c)
			// Every admission came from a script; a request that starts
			// after Redis refused its key is refused locally until the
			// time Redis gave (decideExact), so under load fewer than one
			// script per decision may go (a run read 449 of 480).
			if n1+n2 < 100 || n1+n2 > 480 {
				t.Errorf("%d scripts sent, want from 100 (one per admission) to 480 (one per decision)", n1+n2)
			}
			if rt1+rt2 >= n1+n2 {
				t.Errorf("%d decisions in %d round trips: not batched", n1+n2, rt1+rt2)
			}
			t.Logf("%d decisions in %d round trips", n1+n2, rt1+rt2)
		})
	}
}

// On a real Redis Cluster, a batch spans keys in many hash slots on every
// node: each key's quota is still exact.
func TestBatchedDecisionsOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	b := &testBackend{c: newTestClient(t, cl.Addrs()...), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "0.001", "burst": "5", "key_resolver": "userId"})
	r.RedisTimeout = 10 * time.Second
	l := instance(t, b, "slots")
	var keys []string
	for i := range 40 {
		keys = append(keys, "user-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	// A '}' in a key ends its hash tag early: these share one slot, so a
	// batch sends them in one script call.
	keys = append(keys, "x}1", "x}2", "x}3")
	slots := map[int64]bool{}
	for _, k := range keys {
		rk := redisKey(b.KeyPrefix(), TokenBucket, r.ID, []byte(k))
		s := clusterSlot(t, b, rk)
		if got := keySlot(rk); int64(got) != s {
			t.Errorf("keySlot(%q) = %d, the cluster says %d", rk, got, s)
		}
		slots[s] = true
	}
	if len(slots) < 30 {
		t.Fatalf("the keys fall in %d slots only; want them spread", len(slots))
	}
	got := concurrentTakes(t, []*limiter{l}, r, keys, 12)
	for _, k := range keys {
		if got[k] != 5 {
			t.Errorf("key %s: %d of 12 concurrent requests admitted, want exactly 5", k, got[k])
		}
	}
	// As above: a request that starts after Redis refused its key is
	// refused locally (decideExact), so under load fewer than one script
	// per decision may go (a busy run read 506 of 516).
	n, rt := batchStats(l)
	if lo, hi := int64(len(keys)*5), int64(len(keys)*12); n < lo || n > hi || rt >= n {
		t.Errorf("%d scripts in %d round trips, want from %d (one per admission) to %d (one per decision), batched", n, rt, lo, hi)
	}
}

// clusterSlot asks the cluster for a key's hash slot.
func clusterSlot(t *testing.T, b *testBackend, key string) int64 {
	t.Helper()
	s, err := b.c.ClusterKeySlot(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A paused Redis (SIGSTOP: connections open, no answer): every concurrent
// decision already waiting in a batch gives up at its own redis_timeout and
// follows on_redis_error, allow, deny or local; none waits for another's
// longer timeout. Once Redis answers again, decisions are exact again.
func TestBatchedDecisionsKeepTimeoutAndFailureMode(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	rule := func(id, mode, timeout string) *Rule {
		r, err := ParseRule(id, rulestore.Fields{"scope": "cluster", "qps": "0.001", "burst": "1000",
			"key_resolver": "global", "on_redis_error": mode, "redis_timeout": timeout})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// A long timeout in the same batches must not hold the short ones.
	long := rule("long", "allow", "10s")
	rules := []*Rule{rule("allow", "allow", "300ms"), rule("deny", "deny", "300ms"), rule("local", "local", "300ms")}
	l := instance(t, b, "paused")
	for _, r := range append(rules, long) {
		if d := take(l, r, "global"); !d.OK() || d.Unknown {
			t.Fatalf("rule %s before the pause: %+v", r.ID, d)
		}
	}
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	longDone := make(chan Decision, 1)
	go func() { longDone <- take(l, long, "global") }()
	type result struct {
		rule    string
		d       Decision
		elapsed time.Duration
	}
	results := make(chan result, 3*20)
	var wg sync.WaitGroup
	for _, r := range rules {
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				d := take(l, r, "global")
				results <- result{r.ID, d, time.Since(t0)}
			}()
		}
	}
	wg.Wait()
	close(results)
	for res := range results {
		// 300ms timeout; the margin is for a busy 2-core machine, well
		// below the 10s a batch holding the long rule could take.
		if res.elapsed > 3*time.Second {
			t.Errorf("rule %s: decided after %v, want about its redis_timeout (300ms)", res.rule, res.elapsed)
		}
		switch res.rule {
		case "allow":
			if !res.d.OK() || !res.d.Unknown {
				t.Errorf("allow: %+v, want allowed without quota information", res.d)
			}
		case "deny":
			if res.d.Reason != RedisUnavailable {
				t.Errorf("deny: %+v, want refused as redis unavailable", res.d)
			}
		case "local":
			if !res.d.OK() || res.d.Unknown {
				t.Errorf("local: %+v, want allowed by the local share", res.d)
			}
		}
	}
	if got := counterValue(l.counters.fallbackLocal); got < 1 {
		t.Errorf("fallback local counter %v, want the local decisions counted", got)
	}
	srv.Resume()
	resumed = true
	select {
	case d := <-longDone:
		t.Logf("long-timeout decision: %+v", d)
	case <-time.After(30 * time.Second):
		t.Fatal("the 10s decision did not finish after Redis resumed")
	}
	// The gate probe brings Redis back; then decisions come from Redis.
	deadline := time.Now().Add(20 * time.Second)
	for gateOf(b).down.Load() {
		if time.Now().After(deadline) {
			t.Fatal("gate still down 20s after Redis resumed")
		}
		time.Sleep(20 * time.Millisecond) // sleep: polling the gate's probe
	}
	if d := take(l, rules[1], "global"); !d.OK() || d.Unknown {
		t.Fatalf("after resume: %+v, want decided by Redis", d)
	}
}

// One batch, decided by hand: the token bucket decisions share one script
// call (the sliding window one has its own), also those of another rule (a
// second run of numbers), in order (a key named twice sees its first
// decision's spending), and a key holding a value that is no state of ours
// is decided as fresh state and repaired (packed state, with a TTL).
func TestOneScriptCallDecidesManyKeys(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	srv.Client().Set(t.Context(), "k:tb:bad", "x", 0)
	bt := gateOf(b).batch
	call := func(script *redis.Script, key string, a, b any) *scriptCall {
		return &scriptCall{script: script, many: true, keys: [1]string{key}, args: [4]any{a, b, int64(1), int64(1)},
			nargs: 4, deadline: time.Now().Add(10 * time.Second), done: make(chan struct{}, 1)}
	}
	batch := []*scriptCall{
		call(tokenBucketScript, "k:tb:1", 0.01, 1.0), // burst 1, no refill to speak of
		call(tokenBucketScript, "k:tb:bad", 0.01, 1.0),
		call(slidingWindowScript, "k:sw:1", int64(1e9), 1.0), // 1000 s window, limit 1
		call(tokenBucketScript, "k:tb:2", 0.01, 1.0),
		call(tokenBucketScript, "k:tb:3", 0.01, 5.0), // another rule: burst 5
		call(tokenBucketScript, "k:tb:1", 0.01, 1.0),
	}
	bt.send(batch, nil)
	if n, sc := bt.decisions.Load(), bt.scripts.Load(); n != 6 || sc != 2 {
		t.Fatalf("%d decisions in %d script calls, want 6 in 2 (one per engine)", n, sc)
	}
	for i, want := range []int64{1, 1, 1, 1, 1, 0} {
		c := batch[i]
		<-c.done
		if c.err != nil || c.res.n != want {
			t.Errorf("decision %d (%s): %+v %v, want %d granted", i, c.keys[0], c.res, c.err, want)
		}
	}
	if last := batch[5].res; last.wait <= 0 || last.remaining != 0 {
		t.Errorf("second decision of k:tb:1: %+v, want refused with a wait", last)
	}
	if other := batch[4].res; other.remaining != 4 {
		t.Errorf("k:tb:3 (burst 5): %+v, want 4 remaining", other)
	}
	if v, ttl := srv.Client().Get(t.Context(), "k:tb:bad").Val(), srv.Client().PTTL(t.Context(), "k:tb:bad").Val(); len(v) != 16 || ttl <= 0 {
		t.Errorf("k:tb:bad after the batch: %d bytes, TTL %v; want a packed token-bucket state (16 bytes) with a TTL", len(v), ttl)
	}
}

// keySlot is Redis Cluster's hash slot (the values from the cluster
// specification's examples and CLUSTER KEYSLOT).
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":                  0x31c3, // the CRC16 check value
		"foo":                        12182,
		"{foo}bar":                   12182,
		"x{foo}{bar}":                12182,
		"{user1000}.following":       keySlot("user1000"),
		"{}foo":                      keySlot("{}foo"), // empty tag: the whole key
		"foo{":                       keySlot("foo{"),
		"ratelimit:tb:{r:a}}":        keySlot("r:a"),
		"p{ratelimit:tb:{r:alice}}x": keySlot("ratelimit:tb:{r:alice"),
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// Exact mode keeps per-key state only for a key Redis has no tokens left
// for (to refuse it locally until Redis has them again); a key Redis
// admits with tokens to spare leaves nothing.
func TestExactModeKeepsOnlyRefusals(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "0.001", "burst": "2", "key_resolver": "userId"})
	l := instance(t, b, "exact-keys")
	e := l.engine(r).(*clusterEngine)
	for _, k := range []string{"a", "b", "c"} {
		if d := take(l, r, k); !d.OK() || d.Unknown || d.Remaining != 1 {
			t.Fatalf("key %s: %+v, want admitted by Redis, 1 left", k, d)
		}
	}
	if n := e.keys.Keys(); n != 0 {
		t.Fatalf("%d keys held after three admitted decisions, want 0", n)
	}
	calls := counterValue(l.counters.redisCalls)
	if d := take(l, r, "a"); !d.OK() || d.Remaining != 0 {
		t.Fatalf("key a again: %+v, want admitted with the last token", d)
	}
	if n := e.keys.Keys(); n != 1 {
		t.Fatalf("%d keys held after a's last token, want 1", n)
	}
	if d := take(l, r, "a"); d.Reason != RateLimited || d.RetryAfter <= 0 {
		t.Fatalf("key a a third time: %+v, want refused with a wait", d)
	}
	if got := counterValue(l.counters.redisCalls) - calls; got != 1 {
		t.Fatalf("%v Redis calls for a's last token and its refusal, want 1: the refusal is remembered", got)
	}
}

// On a Redis Cluster one script call may only name keys of one hash slot:
// a batch by hand over keys of two slots (two keys sharing a hash tag)
// leaves as one call per slot, and every key is decided (a CROSSSLOT error
// would fail them all).
func TestOneScriptCallPerSlotOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	b := &testBackend{c: newTestClient(t, cl.Addrs()...), instances: 1}
	bt := gateOf(b).batch
	call := func(key string) *scriptCall {
		return &scriptCall{script: tokenBucketScript, many: true, keys: [1]string{key}, args: [4]any{0.01, 2.0, int64(1), int64(1)},
			nargs: 4, deadline: time.Now().Add(10 * time.Second), done: make(chan struct{}, 1)}
	}
	batch := []*scriptCall{call("k:{a}:1"), call("k:{b}:1"), call("k:{a}:2"), call("k:{a}:1")}
	if keySlot("k:{a}:1") == keySlot("k:{b}:1") {
		t.Fatal("the test's two hash tags share a slot")
	}
	bt.send(batch, nil)
	if n, sc := bt.decisions.Load(), bt.scripts.Load(); n != 4 || sc != 2 {
		t.Fatalf("%d decisions in %d script calls, want 4 in 2 (one per slot)", n, sc)
	}
	for i, wantLeft := range []int64{1, 1, 1, 0} {
		c := batch[i]
		<-c.done
		if c.err != nil || c.res.n != 1 || c.res.remaining != wantLeft {
			t.Errorf("decision %d (%s): %+v %v, want granted with %d left", i, c.keys[0], c.res, c.err, wantLeft)
		}
	}
}

// While a batch is in flight, the decisions that arrive meanwhile wait for
// it and leave together in the next one; a second batch leaves while one
// is in flight only once a whole batch (maxBatch) is waiting. Redis is
// paused (SIGSTOP) so that the batches stay in flight while the test looks.
func TestBatchWaitsForTheOneInFlight(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: patientClient(t, srv.Addr), instances: 1}
	bt := gateOf(b).batch
	bt.maxBatch = 4
	r := clusterRule(t, rulestore.Fields{"qps": "1000", "key_resolver": "userId"})
	r.RedisTimeout = 30 * time.Second // counting, not timing
	l := instance(t, b, "inflight")
	if d := take(l, r, "warm"); !d.OK() || d.Unknown { // loads the script before the pause
		t.Fatalf("first decision: %+v", d)
	}
	n0, rt0 := bt.decisions.Load(), bt.roundTrips.Load()
	state := func() (flushers, pending int) {
		bt.mu.Lock()
		defer bt.mu.Unlock()
		return bt.flushers, len(bt.pending)
	}
	waitFor := func(what string, ok func(flushers, pending int) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for f, p := state(); !ok(f, p); f, p = state() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %d flushers, %d decisions pending", what, f, p)
			}
			time.Sleep(time.Millisecond) // sleep: polling the batcher's state
		}
	}
	// The first decision's flusher is gone before the pause (it yields
	// once after its batch, then finds nothing pending).
	waitFor("the first flusher to finish", func(f, p int) bool { return f == 0 && p == 0 })
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	var wg sync.WaitGroup
	next := 0
	decide := func(n int) {
		for range n {
			key := "user-" + string(rune('a'+next))
			next++
			wg.Add(1)
			go func() {
				defer wg.Done()
				if d := take(l, r, key); !d.OK() || d.Unknown {
					t.Errorf("key %s: %+v, want admitted by Redis", key, d)
				}
			}()
		}
	}
	decide(1)
	waitFor("the first batch in flight", func(f, p int) bool { return f == 1 && p == 0 })
	decide(3)
	waitFor("3 decisions waiting", func(f, p int) bool { return p == 3 })
	if f, _ := state(); f != 1 {
		t.Fatalf("%d batches in flight for 3 waiting decisions, want still 1 (they wait for it)", f)
	}
	decide(1)
	waitFor("a second batch for the full one", func(f, p int) bool { return f == 2 && p == 0 })
	srv.Resume()
	resumed = true
	wg.Wait()
	if n, rt := bt.decisions.Load()-n0, bt.roundTrips.Load()-rt0; n != 5 || rt != 2 {
		t.Errorf("%d decisions in %d round trips, want 5 in 2 (1, then the full batch of 4)", n, rt)
	}
}
