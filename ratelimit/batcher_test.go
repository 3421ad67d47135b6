package ratelimit

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/cluster"
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

// batchStats is how many decisions and round trips a client's batcher sent.
func batchStats(l *limiter) (decisions, roundTrips int64) {
	g := gateOf(l.backend.Load().B)
	decisions, roundTrips, _ = g.Batch.Stats()
	return decisions, roundTrips
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
		rk := cluster.RedisKey(b.KeyPrefix(), TokenBucket, r.ID, []byte(k))
		s := clusterSlot(t, b, rk)
		if got := cluster.KeySlot(rk); int64(got) != s {
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
	for gateOf(b).Down.Load() {
		if time.Now().After(deadline) {
			t.Fatal("gate still down 20s after Redis resumed")
		}
		time.Sleep(20 * time.Millisecond) // sleep: polling the gate's probe
	}
	if d := take(l, rules[1], "global"); !d.OK() || d.Unknown {
		t.Fatalf("after resume: %+v, want decided by Redis", d)
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
	if n := e.LeaseKeys(); n != 0 {
		t.Fatalf("%d keys held after three admitted decisions, want 0", n)
	}
	calls := counterValue(l.counters.redisCalls)
	if d := take(l, r, "a"); !d.OK() || d.Remaining != 0 {
		t.Fatalf("key a again: %+v, want admitted with the last token", d)
	}
	if n := e.LeaseKeys(); n != 1 {
		t.Fatalf("%d keys held after a's last token, want 1", n)
	}
	if d := take(l, r, "a"); d.Reason != RateLimited || d.RetryAfter <= 0 {
		t.Fatalf("key a a third time: %+v, want refused with a wait", d)
	}
	if got := counterValue(l.counters.redisCalls) - calls; got != 1 {
		t.Fatalf("%v Redis calls for a's last token and its refusal, want 1: the refusal is remembered", got)
	}
}
