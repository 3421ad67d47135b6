package engine

import "testing"

// A local settling rule's settlement charges the entry its decision found,
// without a lookup, and only while that entry still holds the key: once
// the key was evicted and its entry reused by another key, the settlement
// looks the key up again and charges it, never the other key.
func TestSettleChargesTheAdmittedEntryOnly(t *testing.T) {
	r := bucket(0.001, 10, 2) // response_cost, reserve 1
	r.Settles, r.Reserve = true, 1
	const now = int64(1e9)
	clock := func() int64 { return now }
	left := func(e *Local, key string) int64 { // what a request of the key is told
		d := e.TakeCost(r, []byte(key), now, r.Cost)
		return d.Remaining
	}

	e := NewLocal(r)
	d := e.TakeCost(r, []byte("alice"), now, r.Cost) // spends the reserve: 9 left
	ref := RefOf(&d)
	if !d.OK() || ref.shard == nil {
		t.Fatalf("decision %+v, ref %+v: want admitted with its entry", d, ref)
	}
	if debt, _ := e.SettleAt(r, []byte("alice"), ref, clock, 4); debt {
		t.Fatal("charge of 4 on 9 tokens: debt")
	}
	if got := left(e, "alice"); got != 10-1-4-1 {
		t.Fatalf("alice after a charge of 4: %d left, want 4", got)
	}

	e = NewLocal(r)
	d = e.TakeCost(r, []byte("alice"), now, r.Cost)
	ref = RefOf(&d)
	e.TakeCost(r, []byte("bob"), now, r.Cost)
	e.TakeCost(r, []byte("carol"), now, r.Cost) // evicts alice, takes her entry
	s := ref.shard
	s.mu.Lock()
	reused := e.tab.lookupHashed(s, []byte("carol"), e.tab.hash([]byte("carol"))) == ref.at
	s.mu.Unlock()
	if !reused {
		t.Fatal("carol did not take alice's entry: the case is not set up")
	}
	e.SettleAt(r, []byte("alice"), ref, clock, 4)
	if got := left(e, "carol"); got != 10-1-1 {
		t.Fatalf("carol after alice's charge: %d left, want 8 (not charged)", got)
	}
	if got := left(e, "alice"); got != 10-4-1 {
		t.Fatalf("alice, evicted, then charged 4: %d left, want 5 (its reserve of 1 forgiven by eviction, charged, this request)", got)
	}
}
