package engine

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The entry must hold no pointer (else the GC marks every key again) and
// stay within two cache lines.
func TestEntryHoldsNoPointers(t *testing.T) {
	var walk func(reflect.Type) bool
	walk = func(ty reflect.Type) bool {
		switch ty.Kind() {
		case reflect.Struct:
			for i := range ty.NumField() {
				if walk(ty.Field(i).Type) {
					return true
				}
			}
			return false
		case reflect.Array:
			return walk(ty.Elem())
		case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
			return true
		}
		return false
	}
	if walk(reflect.TypeFor[entry]()) {
		t.Fatal("entry holds a pointer")
	}
	if n := reflect.TypeFor[entry]().Size(); n > 128 {
		t.Fatalf("entry is %d bytes, want at most 128", n)
	}
}

// 10,000 tracked keys add a few hundred heap objects (chunks, map tables),
// not one or more per key.
func TestTableHeapObjectsPerKey(t *testing.T) {
	objs, bytes := tableHeap(t, 10_000)
	t.Logf("10,000 keys: %.0f heap objects, %.0f bytes per key", objs, bytes/10_000)
	if objs > 1000 {
		t.Fatalf("10,000 keys add %.0f heap objects, want at most 1000", objs)
	}
}

// Keys longer than an entry holds live in the shard's arena: each keeps its
// own state while the table turns over many times, the arena is compacted
// (it stays near the live keys' size), and scan reports every live key.
func TestTableLongKeys(t *testing.T) {
	tab := NewTable(1)
	s := &tab.shards[0]
	const live = 100
	long := func(i int) []byte { return fmt.Appendf(nil, "%s-%d", strings.Repeat("k", 40), i) }
	for i := range 50 * live {
		e := tab.get(s, long(i), sec, sec, live)
		e.tb.tokens = float64(i) // a mark of whose entry this is
	}
	if s.live != live {
		t.Fatalf("%d live keys, want %d", s.live, live)
	}
	for i := 49 * live; i < 50*live; i++ {
		if e := tab.get(s, long(i), sec, sec, live); e.tb.tokens != float64(i) {
			t.Fatalf("key %d holds the state of key %.0f", i, e.tb.tokens)
		}
	}
	if n, max := len(s.arena), 4*live*len(long(0))+4096; n > max {
		t.Fatalf("arena of %d bytes for %d live keys, want at most %d", n, live, max)
	}
	seen := map[string]bool{}
	tab.scan(func(e *entry, key []byte) { seen[string(key)] = true })
	for i := 49 * live; i < 50*live; i++ {
		if !seen[string(long(i))] {
			t.Fatalf("scan missed key %d (saw %d keys)", i, len(seen))
		}
	}
	if len(seen) != live {
		t.Fatalf("scan saw %d keys, want %d", len(seen), live)
	}
}

// Keys whose hashes are equal are told apart by their bytes, and removing
// one from the start, middle or end of their probe run keeps the others.
func TestTableHashCollisions(t *testing.T) {
	tab := NewTable(1)
	s := &tab.shards[0]
	const h = 42
	keys := []string{"a", "b", "c", "d"}
	for i, k := range keys {
		e := s.at(tab.insertHashed(s, []byte(k), h, sec))
		e.tb.tokens = float64(i)
	}
	check := func(want ...string) {
		t.Helper()
		n := 0
		for i, p := s.idx.candidate(h, s.idx.start(h)); i != 0; i, p = s.idx.candidate(h, p) {
			n++
		}
		if n != len(want) || s.live != len(want) || s.idx.n != len(want) {
			t.Fatalf("%d indexed under the hash, %d live, %d slots used, want %d", n, s.live, s.idx.n, len(want))
		}
		for _, k := range want {
			i := tab.lookupHashed(s, []byte(k), h)
			if i == 0 || s.at(i).tb.tokens != float64(strings.Index("abcd", k)) {
				t.Fatalf("key %q lost or mixed up", k)
			}
		}
	}
	check("a", "b", "c", "d")
	for _, k := range []string{"b", "d", "a", "c"} { // middle, head, end, last
		tab.remove(s, tab.lookupHashed(s, []byte(k), h))
		var rest []string
		for _, r := range keys {
			if tab.lookupHashed(s, []byte(r), h) != 0 {
				rest = append(rest, r)
			}
		}
		check(rest...)
	}
	if i, _ := s.idx.candidate(h, s.idx.start(h)); i != 0 || s.idx.n != 0 {
		t.Fatalf("the hash stays indexed with no key (%d slots used)", s.idx.n)
	}
}

// A key evicted while it has a request in flight keeps its entry until the
// request ends, so that the release does not land in the entry's next key.
func TestTableEvictedInFlightKeyIsNotReused(t *testing.T) {
	r := bucket(1e9, 0, 3)
	r.MaxConcurrent = 1
	e := NewLocal(r)
	var held []Decision
	for _, k := range []string{"a", "b", "c"} {
		d := e.Take(r, []byte(k), sec)
		if !d.OK() {
			t.Fatalf("%s: %v", k, d.Reason)
		}
		held = append(held, d)
	}
	// All in flight: the next keys evict them anyway (max_keys holds).
	var next []Decision
	for _, k := range []string{"x", "y", "z"} {
		d := e.Take(r, []byte(k), sec)
		if !d.OK() {
			t.Fatalf("%s: %v", k, d.Reason)
		}
		next = append(next, d)
	}
	for i := range held {
		e.Release(&held[i])
	}
	// x, y and z still hold their one slot each: a second request waits.
	for _, k := range []string{"x", "y", "z"} {
		if d := e.Take(r, []byte(k), sec); d.Reason != TooManyInFlight {
			t.Fatalf("%s with its one slot held: %v, want too many in flight", k, d.Reason)
		}
	}
	for i := range next {
		e.Release(&next[i])
	}
	for _, k := range []string{"x", "y", "z"} {
		d := e.Take(r, []byte(k), sec)
		if !d.OK() {
			t.Fatalf("%s after its release: %v", k, d.Reason)
		}
		e.Release(&d)
	}
	if n := e.Keys(); n != 3 {
		t.Fatalf("%d keys, want 3", n)
	}
}

// A sweep that empties a shard gives its chunks back; the table then works
// as new.
func TestTableSweepReturnsChunks(t *testing.T) {
	tab := NewTable(1)
	s := &tab.shards[0]
	for i := range 5000 {
		s.mu.Lock()
		tab.get(s, fmt.Appendf(nil, "%d", i), sec, sec, 10_000)
		s.mu.Unlock()
	}
	tab.Sweep(3*sec, sec)
	if tab.keys.Load() != 0 || s.chunks != nil || s.idx.n != 0 || s.idx.slots != nil {
		t.Fatalf("after the sweep: %d keys, %d chunks, %d indexed", tab.keys.Load(), len(s.chunks), s.idx.n)
	}
	e := tab.get(s, []byte("again"), 4*sec, sec, 10_000)
	e.tb.tokens = 7
	if e := tab.get(s, []byte("again"), 4*sec, sec, 10_000); e.tb.tokens != 7 || tab.keys.Load() != 1 {
		t.Fatalf("after reuse: tokens %v, %d keys", e.tb.tokens, tab.keys.Load())
	}
}

// testLease is what a table user keeps beside an entry.
type testLease struct{ tokens int64 }

// LeaseOf reads a key's lease without making an entry or moving the key.
func TestTableLeaseOf(t *testing.T) {
	tab := NewTable(1)
	s := &tab.shards[0]
	if ls := tab.LeaseOf(s, []byte("a")); ls != nil {
		t.Fatal("a lease for a key never seen")
	}
	ia := tab.Find(s, []byte("a"), sec, sec, 10)
	la := s.Lease(ia, func() any { return new(testLease) }).(*testLease)
	la.tokens = 5
	tab.Find(s, []byte("b"), sec, sec, 10)
	if ls := tab.LeaseOf(s, []byte("a")); ls != any(la) || la.tokens != 5 {
		t.Fatalf("leaseOf(a) = %v, want a's lease", ls)
	}
	if ls := tab.LeaseOf(s, []byte("b")); ls != nil {
		t.Fatal("a lease for b, which has none")
	}
	if ls := tab.LeaseOf(s, []byte("c")); ls != nil || s.live != 2 || s.head == ia {
		t.Fatalf("leaseOf(c) = %v with %d keys; a is most recent: %v", ls, s.live, s.head == ia)
	}
}

// Lookups drop keys idle longer than the idle time, also after the shard
// noted a tail that was not idle yet (it skips reading the tail until
// then), after that tail was touched again, and with a shorter idle time
// (a changed rule).
func TestTableLookupsExpireIdleKeys(t *testing.T) {
	tab := NewTable(1)
	s := &tab.shards[0]
	const idle = 10 * sec
	tab.get(s, []byte("a"), 1*sec, idle, 100)
	tab.get(s, []byte("b"), 2*sec, idle, 100)
	tab.get(s, []byte("c"), 5*sec, idle, 100) // a is the tail, not idle: noted
	tab.get(s, []byte("a"), 6*sec, idle, 100) // touched: b is the tail now
	tab.get(s, []byte("c"), 11*sec+sec/2, idle, 100)
	if s.live != 3 {
		t.Fatalf("at 11.5 s: %d keys, want 3 (b, seen at 2 s, is idle for 9.5 s only)", s.live)
	}
	tab.get(s, []byte("c"), 13*sec, idle, 100) // b idle 11 s: dropped; a (6 s) stays
	if s.live != 2 || tab.lookupHashed(s, []byte("b"), tab.hash([]byte("b"))) != 0 {
		t.Fatalf("at 13 s: %d keys (b held: %v), want 2 without b", s.live, tab.lookupHashed(s, []byte("b"), tab.hash([]byte("b"))) != 0)
	}
	tab.get(s, []byte("c"), 14*sec, 5*sec, 100) // a idle 8 s > a rule's new 5 s
	if s.live != 1 {
		t.Fatalf("idle time lowered to 5 s at 14 s: %d keys, want 1 (c)", s.live)
	}
}
