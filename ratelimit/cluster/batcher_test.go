package cluster

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/engine"
)

// patientClient is a client of Redis at addr whose reads and writes wait
// far longer than the tests' own waits: a batch must not fail while Redis
// is paused on a busy machine.
func patientClient(t *testing.T, addr string) redis.UniversalClient {
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true,
		MaxRetries: 1, DialTimeout: time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// One batch, decided by hand: the token bucket decisions share one script
// call (the sliding window one has its own), also those of another rule (a
// second run of numbers), in order (a key named twice sees its first
// decision's spending), and a key holding a value that is no state of ours
// is decided as fresh state and repaired (packed state, with a TTL).
func TestOneScriptCallDecidesManyKeys(t *testing.T) {
	srv := redistest.Start(t)
	srv.Client().Set(t.Context(), "k:tb:bad", "x", 0)
	bt := NewBatcher(newTestClient(t, srv.Addr))
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
		if c.err != nil || c.res.N != want {
			t.Errorf("decision %d (%s): %+v %v, want %d granted", i, c.keys[0], c.res, c.err, want)
		}
	}
	if last := batch[5].res; last.Wait <= 0 || last.Remaining != 0 {
		t.Errorf("second decision of k:tb:1: %+v, want refused with a wait", last)
	}
	if other := batch[4].res; other.Remaining != 4 {
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
		"{user1000}.following":       KeySlot("user1000"),
		"{}foo":                      KeySlot("{}foo"), // empty tag: the whole key
		"foo{":                       KeySlot("foo{"),
		"ratelimit:tb:{r:a}}":        KeySlot("r:a"),
		"p{ratelimit:tb:{r:alice}}x": KeySlot("ratelimit:tb:{r:alice"),
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// On a Redis Cluster one script call may only name keys of one hash slot:
// a batch by hand over keys of two slots (two keys sharing a hash tag)
// leaves as one call per slot, and every key is decided (a CROSSSLOT error
// would fail them all).
func TestOneScriptCallPerSlotOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	bt := NewBatcher(newTestClient(t, cl.Addrs()...))
	call := func(key string) *scriptCall {
		return &scriptCall{script: tokenBucketScript, many: true, keys: [1]string{key}, args: [4]any{0.01, 2.0, int64(1), int64(1)},
			nargs: 4, deadline: time.Now().Add(10 * time.Second), done: make(chan struct{}, 1)}
	}
	batch := []*scriptCall{call("k:{a}:1"), call("k:{b}:1"), call("k:{a}:2"), call("k:{a}:1")}
	if KeySlot("k:{a}:1") == KeySlot("k:{b}:1") {
		t.Fatal("the test's two hash tags share a slot")
	}
	bt.send(batch, nil)
	if n, sc := bt.decisions.Load(), bt.scripts.Load(); n != 4 || sc != 2 {
		t.Fatalf("%d decisions in %d script calls, want 4 in 2 (one per slot)", n, sc)
	}
	for i, wantLeft := range []int64{1, 1, 1, 0} {
		c := batch[i]
		<-c.done
		if c.err != nil || c.res.N != 1 || c.res.Remaining != wantLeft {
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
	bt := NewBatcher(patientClient(t, srv.Addr))
	bt.maxBatch = 4
	l := &engine.Limits{ScriptArgs: [2]any{1000.0, 1000.0}} // qps 1000
	take := func(key string) (Grant, error) {
		return bt.Run(engine.TokenBucket, key, l, 1, 1, 30*time.Second) // counting, not timing
	}
	if g, err := take("warm"); err != nil || g.N != 1 { // loads the script before the pause
		t.Fatalf("first decision: %+v %v", g, err)
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
				if g, err := take(key); err != nil || g.N != 1 {
					t.Errorf("key %s: %+v %v, want admitted by Redis", key, g, err)
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

// newTestClient is configured as the rule store configures its client.
func newTestClient(t testing.TB, addrs ...string) redis.UniversalClient {
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, ContextTimeoutEnabled: true,
		MaxRetries: 1, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}
