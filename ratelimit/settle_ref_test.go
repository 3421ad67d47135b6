package ratelimit

import (
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// A local settling rule's settlement charges the entry its decision found,
// without a lookup, and only while that entry still holds the key: once
// the key was evicted and its entry reused by another key, the settlement
// looks the key up again and charges it, never the other key.
func TestSettleChargesTheAdmittedEntryOnly(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "0.001", "burst": "10", "max_keys": "2",
		"response_cost": "{http.response.header.X-Cost}", "reserve": "1", "max_cost": "10"})
	const now = int64(1e9)
	left := func(e *localEngine, key string) int64 { // what a request of the key is told
		d := e.take(r, []byte(key), now, r.Cost)
		return d.Remaining
	}

	e := newLocalEngine(r)
	d := e.take(r, []byte("alice"), now, r.Cost) // spends the reserve: 9 left
	ref := refOf(&d)
	if !d.OK() || ref.shard == nil {
		t.Fatalf("decision %+v, ref %+v: want admitted with its entry", d, ref)
	}
	if debt := e.settleAt(r, []byte("alice"), ref, now, 4); debt {
		t.Fatal("charge of 4 on 9 tokens: debt")
	}
	if got := left(e, "alice"); got != 10-1-4-1 {
		t.Fatalf("alice after a charge of 4: %d left, want 4", got)
	}

	e = newLocalEngine(r)
	d = e.take(r, []byte("alice"), now, r.Cost)
	ref = refOf(&d)
	e.take(r, []byte("bob"), now, r.Cost)
	e.take(r, []byte("carol"), now, r.Cost) // evicts alice, takes her entry
	s := ref.shard
	s.mu.Lock()
	reused := e.tab.lookupHashed(s, []byte("carol"), e.tab.hash([]byte("carol"))) == ref.at
	s.mu.Unlock()
	if !reused {
		t.Fatal("carol did not take alice's entry: the case is not set up")
	}
	e.settleAt(r, []byte("alice"), ref, now, 4)
	if got := left(e, "carol"); got != 10-1-1 {
		t.Fatalf("carol after alice's charge: %d left, want 8 (not charged)", got)
	}
	if got := left(e, "alice"); got != 10-4-1 {
		t.Fatalf("alice, evicted, then charged 4: %d left, want 5 (fresh, charged, this request)", got)
	}
}
