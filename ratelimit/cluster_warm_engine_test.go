package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
)

// Two instances share one warm-up curve in Redis (warm_up_pace, scope
// cluster): quick requests alternating between them get the cold slots
// the local model computes, about cold_factor/qps apart, whichever
// instance asks (two per-instance curves would let each instance's first
// request go at once), and the first slot beyond max_queue_wait is
// refused with the true Retry-After.
func TestClusterWarmUpPaceSharedCurve(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	r := clusterRule(t, rulestore.Fields{"qps": "10", "control_behavior": "warm_up_pace", "warm_up_period": "1m",
		"max_queue_wait": "1s", "key_resolver": "global"})
	ls := []*limiter{instance(t, b, "warm-a"), instance(t, b, "warm-b")}
	slots := engine.ColdSlots(10, 3, int64(time.Minute), 5)
	start := time.Now()
	waits := takeAlternately(t, ls, r, 4)
	d := take(ls[0], r, "k")
	took := time.Since(start)
	// Slot i lies slots[i] after the first call; each wait is that minus
	// the time since, so it lies within (slot - took, slot] (+1 ms for
	// the script's µs rounding).
	for i, w := range waits {
		if slot := time.Duration(slots[i]); w > slot+time.Millisecond || w <= slot-took-time.Millisecond {
			t.Fatalf("waits %v (took %v), want the model's slots %v", waits, took, slots[:4])
		}
	}
	if waits[1] < 250*time.Millisecond {
		t.Fatalf("second request (the other instance) waited %v, want about the cold interval 300ms: the curve is shared", waits[1])
	}
	// The 5th slot is beyond max_queue_wait (1 s) by slots[4] - 1 s.
	if over := slots[4] - int64(time.Second); d.Reason != RateLimited || d.RetryAfter <= 0 || d.RetryAfter > over+int64(time.Millisecond) {
		t.Fatalf("5th request: %+v, want refused with a retry of at most %v", d, time.Duration(over))
	}
}

// warm_up with scope cluster refuses what is beyond the fleet's curve: a
// cold burst of 30 at qps 30 (burst 30) admits what the model admits for
// one bucket (burst/cold_factor = 10 at once, then qps/cold_factor while
// the burst lasts), not 10 per instance.
func TestClusterWarmUpColdBurst(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	r := clusterRule(t, rulestore.Fields{"qps": "30", "burst": "30", "control_behavior": "warm_up", "warm_up_period": "1m",
		"key_resolver": "global"})
	ls := []*limiter{instance(t, b, "warm-a"), instance(t, b, "warm-b")}
	slots := engine.ColdSlots(30, 3, int64(time.Minute), 30)
	tol := r.Flow.Tolerance(&r.Limits, 1)
	start := time.Now()
	var admitted [2]int
	for i := 0; i < 30; i++ {
		d := take(ls[i%2], r, "k")
		switch {
		case d.OK():
			admitted[i%2]++
		case d.Reason != RateLimited || d.RetryAfter <= 0:
			t.Fatalf("request %d: %+v, want admitted or refused with a Retry-After", i+1, d)
		}
	}
	took := time.Since(start)
	// At least the slots within the tolerance; at most those within the
	// tolerance plus the time the requests took (+1 ms rounding).
	lo, hi := 0, 0
	for _, s := range slots {
		if s <= tol {
			lo++
		}
		if s <= tol+int64(took+time.Millisecond) {
			hi++
		}
	}
	if n := admitted[0] + admitted[1]; n < lo || n > hi || admitted[0] == 0 || admitted[1] == 0 {
		t.Fatalf("cold burst: admitted %v (of 30, in %v), want %d..%d across both instances (two local curves would admit %d)", admitted, took, lo, hi, 2*lo)
	}
}

// On a real three-node Redis Cluster each key's curve lives in its slot's
// node (hash-tagged key): every cold key's first request goes at once and
// its second gets the model's next slot, about cold_factor/qps later.
func TestClusterWarmUpOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	b := &testBackend{c: newTestClient(t, cl.Addrs()...), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "10", "control_behavior": "warm_up_pace", "warm_up_period": "1m",
		"max_queue_wait": "1s", "key_resolver": "userId"})
	l := instance(t, b, "warm-cluster")
	slot := time.Duration(engine.ColdSlots(10, 3, int64(time.Minute), 2)[1])
	for k := 0; k < 12; k++ {
		key := fmt.Sprintf("user-%d", k)
		start := time.Now()
		first, second := take(l, r, key), take(l, r, key)
		took := time.Since(start)
		if !first.OK() || first.Wait != 0 || !second.OK() || second.Wait <= int64(slot-took-time.Millisecond) || second.Wait > int64(slot+time.Millisecond) {
			t.Fatalf("%s: %+v then %+v, want at once then %v later", key, first, second, slot)
		}
		for _, d := range []Decision{first, second} {
			if d.Queued != nil {
				d.Queued.Add(-1)
			}
		}
	}
	if used := cl.NodesHolding("t:ratelimit:wu:*"); used < 2 {
		t.Fatalf("curves on %d node(s), want them spread over the cluster", used)
	}
}
