package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// indexHolds reports the entries x lists under hash h.
func indexHolds(x *keyIndex, h uint64) map[int32]bool {
	got := map[int32]bool{}
	for i, p := x.candidate(h, x.start(h)); i != 0; i, p = x.candidate(h, p) {
		got[i] = true
	}
	return got
}

// checkIndex compares x with the reference ref (entry → hash): every entry
// is found under its hash, no other entry of that hash is (tags are the
// high 32 bits: entries of another hash with the same tag count too), and
// the count of used slots matches.
func checkIndex(t *testing.T, x *keyIndex, ref map[int32]uint64) {
	t.Helper()
	if x.n != len(ref) {
		t.Fatalf("%d slots used, want %d", x.n, len(ref))
	}
	used := 0
	for _, v := range x.slots {
		if v != 0 {
			used++
		}
	}
	if used != len(ref) {
		t.Fatalf("%d nonzero slots, want %d", used, len(ref))
	}
	for i, h := range ref {
		got := indexHolds(x, h)
		if !got[i] {
			t.Fatalf("entry %d lost under hash %#x", i, h)
		}
		for j := range got {
			if h2, ok := ref[j]; !ok || h2>>32 != h>>32 {
				t.Fatalf("hash %#x lists entry %d (hash %#x, held %v)", h, j, h2, ok)
			}
		}
	}
}

// Random inserts and removals match a reference map, through growth and
// with hashes drawn from a few homes and tags (long probe runs that wrap
// around the end of the slots, equal tags and equal hashes).
func TestKeyIndexMatchesReference(t *testing.T) {
	for _, c := range []struct {
		name string
		hash func(r *rand.Rand) uint64
	}{
		{"spread", func(r *rand.Rand) uint64 { return r.Uint64() }},
		{"few-homes", func(r *rand.Rand) uint64 { return uint64(r.IntN(3))<<62 | uint64(r.IntN(1<<20))<<32 }},
		{"last-home", func(r *rand.Rand) uint64 { return ^uint64(0) - uint64(r.IntN(4))<<32 }},
		{"few-hashes", func(r *rand.Rand) uint64 { return uint64(r.IntN(5)) << 61 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var x keyIndex
			ref := map[int32]uint64{}
			var live []int32
			next := int32(1)
			for step := range 10_000 {
				if len(live) > 0 && (r.IntN(3) == 0 || len(live) > 600) {
					k := r.IntN(len(live))
					i := live[k]
					x.remove(ref[i], i)
					delete(ref, i)
					live[k] = live[len(live)-1]
					live = live[:len(live)-1]
				} else {
					h := c.hash(r)
					x.insert(h, next)
					ref[next] = h
					live = append(live, next)
					next++
				}
				if step%199 == 0 || len(live) < 20 {
					checkIndex(t, &x, ref)
				}
			}
			checkIndex(t, &x, ref)
			if x.n*4 > len(x.slots)*3 {
				t.Fatalf("%d of %d slots used", x.n, len(x.slots))
			}
		})
	}
}

// An empty index, never grown, finds nothing.
func TestKeyIndexEmpty(t *testing.T) {
	var x keyIndex
	if i, _ := x.candidate(42, x.start(42)); i != 0 {
		t.Fatalf("found %d in an empty index", i)
	}
}

// A table of many keys over several shards, with keys coming and going
// (max_keys evictions, idle expiry), keeps every live key's own state, its
// index and its recency list in step with its entries.
func TestTableIndexThroughChurn(t *testing.T) {
	tab := NewTable(4)
	const perShard = 50
	r := rand.New(rand.NewPCG(3, 4))
	mark := map[string]float64{}
	now := sec
	for step := range 50_000 {
		now += int64(r.IntN(1000))
		k := []byte{byte('a' + r.IntN(26)), byte('a' + r.IntN(26)), byte('a' + r.IntN(26))}
		s := tab.Shard(k)
		e := tab.get(s, k, now, 30_000, perShard)
		if want, ok := mark[string(k)]; ok && e.tb.tokens != 0 && e.tb.tokens != want {
			t.Fatalf("step %d: key %s holds %v, want %v", step, k, e.tb.tokens, want)
		}
		e.tb.tokens = float64(step + 1)
		mark[string(k)] = e.tb.tokens
	}
	total := 0
	for si := range tab.shards {
		s := &tab.shards[si]
		if s.live > perShard || s.idx.n != s.live {
			t.Fatalf("shard %d: %d live, %d indexed, at most %d", si, s.live, s.idx.n, perShard)
		}
		checkRecencyList(t, s, true)
		total += s.live
	}
	n := 0
	tab.scan(func(e *entry, key []byte) {
		n++
		s := tab.Shard(key)
		if got := tab.lookupHashed(s, key, tab.hash(key)); s.at(got) != e {
			t.Fatalf("key %s: lookup finds entry %d, not its own", key, got)
		}
		if e.tb.tokens != mark[string(key)] {
			t.Fatalf("key %s holds %v, want %v", key, e.tb.tokens, mark[string(key)])
		}
	})
	if n != total || int64(total) != tab.keys.Load() {
		t.Fatalf("scan saw %d keys, shards hold %d, count %d", n, total, tab.keys.Load())
	}
}

// checkRecencyList walks s's recency list from the head: it holds every
// live entry once, linked both ways, and ends at the tail; with bySeen, it
// is also ordered by seen (most recent first), which holds when one caller
// with one clock used the table (callers on several goroutines read their
// clocks before they take the lock, so their times can reach it out of
// order).
func checkRecencyList(t *testing.T, s *Shard, bySeen bool) {
	t.Helper()
	n, prev := 0, int32(0)
	for i := s.head; i != 0; i = s.links[i].next {
		if s.links[i].prev != prev {
			t.Fatalf("entry %d links back to %d, not %d", i, s.links[i].prev, prev)
		}
		if bySeen && prev != 0 && s.at(i).seen > s.at(prev).seen {
			t.Fatalf("entry %d (seen %d) after entry %d (seen %d)", i, s.at(i).seen, prev, s.at(prev).seen)
		}
		if n++; n > s.live {
			t.Fatalf("the list is longer than the %d live entries", s.live)
		}
		prev = i
	}
	if n != s.live || s.tail != prev {
		t.Fatalf("the list holds %d of %d live entries, ends at %d, tail %d", n, s.live, prev, s.tail)
	}
}

// Callers on several goroutines take and release slots over more keys than
// max_keys holds, so keys are evicted with requests in flight (their
// entries wait for them) while others are looked up: afterwards every
// shard's index, recency list and free entries agree, and every in-flight
// count is back to 0. Run with -race it also checks the shards' locking.
func TestTableConcurrentChurn(t *testing.T) {
	r := bucket(1e9, 0, 256)
	r.MaxConcurrent = 2
	e := NewLocal(r)
	const callers, perCaller = 4, 5000
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 9))
			var held []Decision
			for n := range perCaller {
				key := fmt.Appendf(nil, "user:%d", rng.IntN(1000))
				if n%3 == 0 {
					key = fmt.Appendf(key, "-%s", strings.Repeat("x", 40)) // a long key, in the arena
				}
				d := e.Take(r, key, sec+int64(n))
				if d.OK() {
					held = append(held, d)
				}
				if len(held) > 8 || (len(held) > 0 && rng.IntN(2) == 0) {
					e.Release(&held[0])
					held = held[1:]
				}
			}
			for i := range held {
				e.Release(&held[i])
			}
		}()
	}
	wg.Wait()
	live := 0
	for si := range e.tab.shards {
		s := &e.tab.shards[si]
		s.mu.Lock()
		checkRecencyList(t, s, false)
		if s.idx.n != s.live {
			t.Fatalf("shard %d: %d indexed, %d live", si, s.idx.n, s.live)
		}
		for i := s.head; i != 0; i = s.links[i].next {
			if got := e.tab.lookupHashed(s, s.keyOf(s.at(i)), s.at(i).hash); got != i {
				t.Fatalf("shard %d: entry %d's key finds entry %d", si, i, got)
			}
			if n := s.at(i).inflight; n != 0 {
				t.Fatalf("shard %d: entry %d has %d in flight after every release", si, i, n)
			}
		}
		for _, z := range s.zombies {
			if n := s.at(z).inflight; n != 0 {
				t.Fatalf("shard %d: removed entry %d has %d in flight after every release", si, z, n)
			}
		}
		free := 0
		for i := s.free; i != 0; i = s.links[i].next {
			if free++; free > int(s.cap) {
				t.Fatalf("shard %d: the free list loops", si)
			}
		}
		// Every entry handed out is live, free or waiting on its requests.
		if handed := int(s.next) - 1; s.live+free+len(s.zombies) != handed {
			t.Fatalf("shard %d: %d live + %d free + %d removed in flight, %d handed out", si, s.live, free, len(s.zombies), handed)
		}
		live += s.live
		s.mu.Unlock()
	}
	if live > 256 || int64(live) != e.tab.keys.Load() {
		t.Fatalf("%d live keys (count %d), want at most 256", live, e.tab.keys.Load())
	}
}
