package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// Two instances share one paced schedule in Redis: at 1 qps with
// max_queue_wait 2500ms, quick requests alternating between them get the
// slots 0, 1 s and 2 s (waiting longer each time, whichever instance asks)
// and the rest are refused with the true Retry-After. A refusal is then
// remembered: the refused instance does not ask Redis again until the
// retry, and a changed rule forgets it.
func TestClusterPaceSharedSchedule(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	r := clusterRule(t, rulestore.Fields{"qps": "1", "control_behavior": "pace", "max_queue_wait": "2500ms", "key_resolver": "global"})
	ls := []*limiter{instance(t, b, "pace-a"), instance(t, b, "pace-b")}
	start := time.Now()
	waits := takeAlternately(t, ls, r, 3)
	took := time.Since(start)
	// Slot i is i seconds after the first call; each wait is that minus
	// the time since, so wait i lies within (i s - took, i s].
	for i, w := range waits {
		if slot := time.Duration(i) * time.Second; w > slot || w <= slot-took-time.Millisecond {
			t.Fatalf("waits %v (took %v): want slot i within i s - took .. i s", waits, took)
		}
	}
	before := time.Now()
	d := take(ls[1], r, "k")
	// The next slot is 3 s away: beyond 2.5 s by about 0.5 s.
	if d.Reason != RateLimited || d.RetryAfter <= 0 || d.RetryAfter > int64(500*time.Millisecond) {
		t.Fatalf("4th request: %+v, want refused with a retry of at most 500ms", d)
	}
	// The refusal is remembered until at least before + RetryAfter.
	remembered := before.Add(time.Duration(d.RetryAfter))
	calls := counterValue(ls[1].counters.redisCalls)
	for i := 0; i < 50; i++ {
		d := take(ls[1], r, "k")
		if d.Reason != RateLimited || d.RetryAfter <= 0 {
			t.Fatalf("refused request %d: %+v", i+1, d)
		}
	}
	got := counterValue(ls[1].counters.redisCalls) - calls
	if time.Now().Before(remembered) {
		if got != 0 {
			t.Fatalf("%v Redis calls for 50 refusals within the remembered retry, want 0", got)
		}
	} else {
		t.Logf("the 50 refusals outlasted the remembered retry (a busy machine): %v Redis calls, not checked", got)
	}
	r2 := clusterRule(t, rulestore.Fields{"qps": "1", "control_behavior": "pace", "max_queue_wait": "1m", "key_resolver": "global"})
	if d := take(ls[1], r2, "k"); !d.OK() || counterValue(ls[1].counters.redisCalls) == calls {
		t.Fatalf("after the rule changed: %+v, want a slot from Redis", d)
	}
}

// On a real three-node Redis Cluster each key's schedule lives in its
// slot's node (hash-tagged key): every key's first request goes at once
// and its second gets the next slot, 1 s later.
func TestClusterPaceOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	b := &testBackend{c: newTestClient(t, cl.Addrs()...), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "1", "control_behavior": "pace", "max_queue_wait": "2s", "key_resolver": "userId"})
	l := instance(t, b, "pace-cluster")
	for k := 0; k < 12; k++ {
		key := fmt.Sprintf("user-%d", k)
		start := time.Now()
		first, second := take(l, r, key), take(l, r, key)
		// The second slot is 1 s after the first call; the second call
		// came at most `took` later (+1 ms for the µs rounding).
		took := time.Since(start)
		if !first.OK() || first.Wait != 0 || !second.OK() || second.Wait < int64(time.Second-took-time.Millisecond) || second.Wait > int64(time.Second) {
			t.Fatalf("%s: %+v then %+v, want at once then about 1s later", key, first, second)
		}
		for _, d := range []Decision{first, second} {
			if d.Queued != nil {
				d.Queued.Add(-1)
			}
		}
	}
	if used := cl.NodesHolding("t:ratelimit:pc:*"); used < 2 {
		t.Fatalf("schedules on %d node(s), want them spread over the cluster", used)
	}
}

// takeAlternately takes n slots of key k, alternating between the
// instances ls, and returns their waits; a refusal fails the test.
func takeAlternately(t *testing.T, ls []*limiter, r *Rule, n int) []time.Duration {
	t.Helper()
	var waits []time.Duration
	for i := 0; i < n; i++ {
		l := ls[i%2]
		d := l.engine(r).Take(r, []byte("k"), l.now())
		if !d.OK() {
			t.Fatalf("request %d: %+v, want a slot", i+1, d)
		}
		waits = append(waits, time.Duration(d.Wait))
		if d.Queued != nil {
			d.Queued.Add(-1) // what waitTurn does when the wait ends
		}
		l.engine(r).Release(&d)
	}
	return waits
}
