package ratelimit

import (
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/rulestore"
)

// A key's lease outlives the rule's idle time (here 1 s: qps = burst): the
// key's next request after 5 s idle, and the janitor's sweep, is served
// from the tokens already leased, without a Redis call. After LeaseHold
// idle the key is dropped, and its next request leases again.
func TestLeaseOutlivesRuleIdle(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "1000", "burst": "1000", "key_resolver": "userId", "lease_size": "100"})
	if r.Idle != int64(time.Second) {
		t.Fatalf("rule idle %v, want 1s", time.Duration(r.Idle))
	}
	l := instance(t, b, "hold")
	e := l.engine(r)
	calls := func() float64 { return counterValue(l.counters.redisCalls) }
	// now is the engine's clock, set by the caller: no waiting.
	takeAt := func(at time.Duration) Decision {
		d := e.Take(r, []byte("alice"), int64(at))
		e.Release(&d)
		if !d.OK() || d.Unknown {
			t.Fatalf("at %v: %+v, want admitted by the lease", at, d)
		}
		return d
	}
	base := time.Hour // any start will do
	takeAt(base)
	if got := calls(); got != 1 {
		t.Fatalf("%v Redis calls for the first request, want 1 (the lease)", got)
	}
	at := base + 5*time.Second
	e.(*clusterEngine).sweep(int64(at), r.Idle)
	d := takeAt(at)
	if got := calls(); got != 1 {
		t.Fatalf("%v Redis calls after 5 s idle, want still 1: the lease is kept", got)
	}
	if d.Remaining != 900+98 {
		t.Errorf("remaining %d, want 998 (900 in Redis + 98 still leased)", d.Remaining)
	}
	at += time.Duration(cluster.LeaseHold) + time.Second
	e.(*clusterEngine).sweep(int64(at), r.Idle)
	takeAt(at)
	if got := calls(); got != 2 {
		t.Fatalf("%v Redis calls after %v idle, want 2: the key was dropped and leased again", got, time.Duration(cluster.LeaseHold))
	}
}
