package engine

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// table holds per-key state for one rule: shards of (mutex, index, LRU list),
// so concurrent requests for different keys rarely meet on a lock, and there
// is no global lock. Each shard holds at most its share of max_keys and
// evicts its least recently used key to admit a new one; keys idle long
// enough that their state equals a fresh one are dropped as they are met.
// It is plain Go with no Caddy imports; time is passed in.
//
// The table holds no pointers per key: entries are fixed-size structs in a
// few large chunks, linked by int32 indices, found through an index of the
// key's 64-bit hash (keyindex.go), with the key's bytes inline or in a byte arena. The GC
// has nothing in them to mark however many keys there are (a
// pointer-linked table was a large part of the rate limit's GC cost; see
// docs/performance.md).
type Table struct {
	seed   maphash.Seed
	shards []Shard
	mask   uint64
	keys   atomic.Int64
}

type Shard struct {
	mu      sync.Mutex
	idx     keyIndex  // key hash → entry
	chunks  [][]entry // entry i is at(i); index 0 means none
	links   []link    // entry i's place in the recency list
	head    int32     // most recently used entry
	tail    int32     // least recently used entry
	next    int32     // the next index never handed out
	free    int32     // a free entry; free ones link through links' next
	cap     int32     // entries in the chunks
	live    int       // entries holding a key
	arena   []byte    // keys longer than inlineKey
	dead    int       // arena bytes of removed keys
	zombies []int32   // removed with requests in flight (see remove)
	zpos    int
	leases  map[int32]any // a cluster engine's lease state per entry (Lease)
	// oldest is no later than the tail's seen (entries are listed by seen:
	// a tail that goes is followed by a newer one), so while now-oldest is
	// within the idle time no entry has been idle that long, and expire
	// does not read the tail, the shard's coldest entry.
	oldest int64
	// gen counts removals (and resets): an entry index taken at gen still
	// holds its key while gen is unchanged (settleAt).
	gen uint32
	// retired: the engine is no longer its limiter's, whose counters now
	// hold charged and refunded (settlementsTo).
	retired bool
	// charged and refunded count the tokens the settlements at entries of
	// this shard charged and refunded, under mu, which the settlement holds
	// anyway: an atomic add of its own would be one more locked
	// instruction per request.
	charged, refunded uint64
	// sketch keeps what keys evicted with spent state left (evict.go).
	sketch evictSketch
}

// entry is one key's state; the engine fields are used by one rule kind.
// The fields a request touches come first, in the entry's first 64 bytes
// with a key of up to inlineKey bytes (one cache miss per lookup).
type entry struct {
	kbuf     [inlineKey]byte
	tb       tokenBucket
	seen     int64 // ns of the last request
	klen     int32
	inflight int32 // requests admitted and not finished (max_concurrent)
	hash     uint64
	koff     int32 // the key's offset in the arena when longer than kbuf
	sw       slidingWindow
	pace     pacer      // control_behavior pace
	warm     warmBucket // control_behavior warm_up, warm_up_pace
}

// inlineKey is the longest key held in the entry: with it the entry is 128
// bytes, two cache lines.
const inlineKey = 32

// link is an entry's neighbours in the recency list, toward the head
// (prev) and the tail (next); a free entry's next is the free list's. The
// links are kept apart from the entries, in one small array per shard:
// moving a key to the front writes its neighbours' links, which are then
// likely in cache where their entries would not be.
type link struct{ prev, next int32 }

// Chunks of entries double from firstChunk up to maxChunk entries, then
// stay at maxChunk: a shard with few keys holds a small chunk, one with
// many wastes at most one chunk's tail. Entries never move, so a pointer
// to one (an in-flight slot's) stays valid.
const (
	firstChunk = 8
	maxChunk   = 1024
	growChunks = 8 // chunks that double: 8 << 7 == maxChunk
)

// maxShards bounds lock striping; fewer shards are used for small max_keys so
// that the LRU stays close to exact (each shard evicts on its own).
const maxShards = 64

// ShardsFor picks the number of shards for a max_keys cap: a power of two,
// at most 64, with at least 64 keys per shard.
func ShardsFor(maxKeys int) int {
	n := 1
	for n < maxShards && maxKeys/(n*2) >= 64 {
		n *= 2
	}
	return n
}

func NewTable(nshards int) *Table {
	t := &Table{seed: maphash.MakeSeed(), shards: make([]Shard, nshards), mask: uint64(nshards - 1)}
	for i := range t.shards {
		t.shards[i].reset()
	}
	return t
}

// reset empties s (all but its mutex); nothing may point into its entries.
func (s *Shard) reset() {
	s.gen++
	s.idx, s.chunks, s.links, s.arena, s.zombies, s.leases = keyIndex{}, nil, nil, nil, nil, nil
	// The sketch stays: it is what the evicted keys still owe.
	s.head, s.tail, s.next, s.free, s.cap = 0, 0, 1, 0, 0
	s.live, s.dead, s.zpos = 0, 0, 0
}

func (t *Table) Shard(key []byte) *Shard {
	if t.mask == 0 {
		return &t.shards[0]
	}
	return &t.shards[maphash.Bytes(t.seed, key)&t.mask]
}

// at returns entry i (not 0).
func (s *Shard) at(i int32) *entry {
	u := uint32(i) + firstChunk
	if u < 2*maxChunk {
		k := bits.Len32(u) - 4 // firstChunk is 1<<3
		return &s.chunks[k][u-firstChunk<<k]
	}
	u -= 2 * maxChunk
	return &s.chunks[growChunks+u/maxChunk][u%maxChunk]
}

func (s *Shard) keyOf(e *entry) []byte {
	if e.klen <= inlineKey {
		return e.kbuf[:e.klen]
	}
	return s.arena[e.koff : e.koff+e.klen]
}

// get returns key's entry in the locked shard s, creating it if needed
// (evicting the least recently used entry when the shard is full), and marks
// it most recently used. Entries idle for longer than idle ns are dropped
// from the cold end first, two at most per call, so the work stays O(1).
func (t *Table) get(s *Shard, key []byte, now, idle int64, perShard int) *entry {
	return s.at(t.Find(s, key, now, idle, perShard))
}

// find is get returning the entry's index.
func (t *Table) Find(s *Shard, key []byte, now, idle int64, perShard int) int32 {
	return t.findHashed(s, key, maphash.Bytes(t.seed, key), now, idle, perShard)
}

// hash is key's hash in the table: its shard is shardOf(hash).
func (t *Table) hash(key []byte) uint64 { return maphash.Bytes(t.seed, key) }

// shardOf is the shard of a key of hash h (shard without hashing again).
func (t *Table) shardOf(h uint64) *Shard { return &t.shards[h&t.mask] }

// getHashed is get for a key whose hash is known.
func (t *Table) getHashed(s *Shard, key []byte, h uint64, now, idle int64, perShard int) *entry {
	return s.at(t.findHashed(s, key, h, now, idle, perShard))
}

// findHashed is find for a key whose hash h is known.
func (t *Table) findHashed(s *Shard, key []byte, h uint64, now, idle int64, perShard int) int32 {
	return t.findKept(s, key, h, now, idle, perShard, nil)
}

// getKept is getHashed keeping the spent state of keys of rule r across
// eviction (findKept).
func (t *Table) getKept(s *Shard, key []byte, h uint64, now, idle int64, perShard int, r *Spec) *entry {
	return s.at(t.findKept(s, key, h, now, idle, perShard, r))
}

// findKept is findHashed for rule r's keys (nil: no rule's), whose rate
// state eviction keeps (evict.go): a key evicted with spent state leaves a
// trace in the shard's sketch, and a new key starts from its trace. A key
// found in the table touches neither.
func (t *Table) findKept(s *Shard, key []byte, h uint64, now, idle int64, perShard int, r *Spec) int32 {
	if i := t.lookupHashed(s, key, h); i != 0 {
		e := s.at(i)
		e.seen = now
		s.toFront(i)
		t.expire(s, now, idle, 2)
		return i
	}
	t.expire(s, now, idle, 2)
	k := keeper{r: r, now: now}
	for s.live >= perShard && t.evictOldest(s, &k, perShard) {
	}
	i := t.insertHashed(s, key, h, now)
	if r != nil && s.sketch.cells != nil {
		k.restore(&s.sketch, s.at(i), h, r.LimitsFor(key))
	}
	return i
}

// lookupHashed returns the index of key, whose hash is h, or 0.
func (t *Table) lookupHashed(s *Shard, key []byte, h uint64) int32 {
	for i, p := s.idx.candidate(h, s.idx.start(h)); i != 0; i, p = s.idx.candidate(h, p) {
		// The tag matched; the key's bytes decide (the entry's hash is
		// in its second cache line, not read on a lookup).
		if e := s.at(i); string(s.keyOf(e)) == string(key) {
			return i
		}
	}
	return 0
}

// insertHashed adds key, whose hash is h and which s does not hold, as the
// most recently used entry.
func (t *Table) insertHashed(s *Shard, key []byte, h uint64, now int64) int32 {
	i := s.alloc()
	e := s.at(i)
	*e = entry{seen: now, hash: h, klen: int32(len(key))}
	if len(key) <= inlineKey {
		copy(e.kbuf[:], key)
	} else {
		e.koff = s.store(key)
	}
	s.idx.insert(h, i)
	s.pushFront(i)
	s.live++
	t.keys.Add(1)
	return i
}

// alloc returns an unused entry index, growing the chunks when none is free.
func (s *Shard) alloc() int32 {
	s.reclaim()
	if i := s.free; i != 0 {
		s.free = s.links[i].next
		return i
	}
	if s.next >= s.cap {
		n := maxChunk
		if len(s.chunks) < growChunks {
			n = firstChunk << len(s.chunks)
		}
		s.chunks = append(s.chunks, make([]entry, n))
		if s.links == nil {
			s.links = make([]link, 1, 1+n) // index 0 is none
		}
		s.links = append(s.links, make([]link, n)...)
		s.cap += int32(n)
	}
	s.next++
	return s.next - 1
}

// reclaim frees up to two removed entries whose requests have finished.
func (s *Shard) reclaim() {
	for n := 0; n < 2 && len(s.zombies) > 0; n++ {
		s.zpos %= len(s.zombies)
		i := s.zombies[s.zpos]
		if s.at(i).inflight > 0 {
			s.zpos++
			continue
		}
		last := len(s.zombies) - 1
		s.zombies[s.zpos] = s.zombies[last]
		s.zombies = s.zombies[:last]
		s.links[i].next, s.free = s.free, i
	}
}

// store appends a long key to the arena, first compacting it when most of
// it is removed keys; it returns the key's offset.
func (s *Shard) store(key []byte) int32 {
	if s.dead >= 4096 && s.dead > len(s.arena)/2 {
		s.compact()
	}
	s.arena = append(s.arena, key...)
	return int32(len(s.arena) - len(key))
}

// compact copies the live long keys into a new arena.
func (s *Shard) compact() {
	a := make([]byte, 0, len(s.arena)-s.dead)
	for i := s.head; i != 0; {
		e := s.at(i)
		if e.klen > inlineKey {
			a = append(a, s.keyOf(e)...)
			e.koff = int32(len(a)) - e.klen
		}
		i = s.links[i].next
	}
	s.arena, s.dead = a, 0
}

// expire drops up to max entries idle for longer than idle ns.
func (t *Table) expire(s *Shard, now, idle int64, max int) {
	if now-s.oldest <= idle {
		return
	}
	for n := 0; n < max; n++ {
		i := s.tail
		if i == 0 {
			return
		}
		e := s.at(i)
		if now-e.seen <= idle {
			s.oldest = e.seen
			return
		}
		if e.inflight > 0 {
			return
		}
		t.remove(s, i)
	}
}

// evictOldest drops the least recently used entry, preferring one with no
// request in flight (so its concurrency count is not lost); it reports
// whether it dropped anything. With a rule to keep (k.r), an entry whose
// state is a fresh key's, among the evictLook coldest, goes first (it
// loses nothing), and an entry with spent state leaves its trace.
func (t *Table) evictOldest(s *Shard, k *keeper, perShard int) bool {
	pick, trace := int32(0), uint64(0)
	for i, n := s.tail, 0; n < 8 && i != 0; i, n = s.links[i].prev, n+1 {
		e := s.at(i)
		if e.inflight > 0 {
			continue
		}
		if k.r == nil {
			pick = i
			break
		}
		if n >= evictLook && pick != 0 {
			break
		}
		v := k.trace(e, k.r.LimitsFor(s.keyOf(e)))
		if v == 0 {
			t.remove(s, i) // fresh: nothing to keep
			return true
		}
		if pick == 0 {
			pick, trace = i, v
		}
	}
	if pick == 0 {
		pick = s.tail
		if pick == 0 {
			return false
		}
		if k.r != nil {
			e := s.at(pick)
			trace = k.trace(e, k.r.LimitsFor(s.keyOf(e)))
		}
	}
	if trace != 0 && k.beyondSketch(&s.sketch, s.at(pick), s.keyOf(s.at(pick))) {
		s.sketch.add(s.at(pick).hash, trace, k.kind(), perShard)
	}
	t.remove(s, pick)
	return true
}

// evictLook is how many of a shard's coldest entries eviction looks at
// for one whose state is fresh.
const evictLook = 4

// remove drops entry i. One with requests in flight is referenced by their
// decisions, which release their slots into it: it is reused only once
// they have (reclaim), so that a release never lands in another key.
func (t *Table) remove(s *Shard, i int32) {
	s.gen++
	e := s.at(i)
	s.unlink(i)
	s.idx.remove(e.hash, i)
	if e.klen > inlineKey {
		s.dead += int(e.klen)
	}
	if s.leases != nil {
		delete(s.leases, i)
	}
	s.live--
	t.keys.Add(-1)
	if e.inflight > 0 {
		s.zombies = append(s.zombies, i)
	} else {
		s.links[i].next, s.free = s.free, i
	}
}

// sweep drops every idle entry; the janitor calls it now and then so memory
// is returned even for keys never seen again: a shard left empty lets go of
// its chunks and index, and a long-key arena of mostly removed keys shrinks.
func (t *Table) Sweep(now, idle int64) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		t.expire(s, now, idle, s.live)
		if s.live == 0 && len(s.zombies) == 0 && s.cap > 0 {
			s.reset()
		} else if s.dead > len(s.arena)/2 {
			s.compact()
		}
		s.mu.Unlock()
	}
}

// sketchBytes is the memory the shards' eviction sketches hold: none
// until a shard evicts a key with spent state, then a fixed size each.
func (t *Table) sketchBytes() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += 8 * len(s.sketch.cells)
		s.mu.Unlock()
	}
	return n
}

// scan calls fn on every entry with its key, each shard locked only while
// it is read; fn must not keep e or key, or change them.
func (t *Table) scan(fn func(e *entry, key []byte)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for j := s.head; j != 0; {
			e := s.at(j)
			fn(e, s.keyOf(e))
			j = s.links[j].next
		}
		s.mu.Unlock()
	}
}

// Lease returns entry i's lease state, made by mk on first use (a cluster
// engine's, in lease mode). It points to a rule, so it lives beside the
// entries, in a map only lease tables have.
func (s *Shard) Lease(i int32, mk func() any) any {
	ls := s.leases[i]
	if ls == nil {
		if s.leases == nil {
			s.leases = make(map[int32]any)
		}
		ls = mk()
		s.leases[i] = ls
	}
	return ls
}

// LeaseOf returns key's lease state in the locked shard s, or nil, without
// making an entry or changing the key's recency (for a check that only
// reads, such as an exact cluster decision's cached refusal).
func (t *Table) LeaseOf(s *Shard, key []byte) any {
	if s.leases == nil {
		return nil
	}
	if i := t.lookupHashed(s, key, maphash.Bytes(t.seed, key)); i != 0 {
		return s.leases[i]
	}
	return nil
}

// toFront makes entry i, in the list, the most recently used.
func (s *Shard) toFront(i int32) {
	if s.head != i {
		s.unlink(i)
		s.pushFront(i)
	}
}

func (s *Shard) pushFront(i int32) {
	s.links[i] = link{next: s.head}
	if s.head != 0 {
		s.links[s.head].prev = i
	} else {
		s.tail = i
	}
	s.head = i
}

func (s *Shard) unlink(i int32) {
	l := s.links[i]
	if l.prev != 0 {
		s.links[l.prev].next = l.next
	} else {
		s.head = l.next
	}
	if l.next != 0 {
		s.links[l.next].prev = l.prev
	} else {
		s.tail = l.prev
	}
	s.links[i] = link{}
}

// Keys is the number of keys the table holds.
func (t *Table) Keys() int64 { return t.keys.Load() }

// PerShard is each shard's share of maxKeys.
func (t *Table) PerShard(maxKeys int) int { return max(1, maxKeys/len(t.shards)) }

// Lock locks s.
func (s *Shard) Lock() { s.mu.Lock() }

// Unlock unlocks s.
func (s *Shard) Unlock() { s.mu.Unlock() }

// SketchBytes is the memory the shards' eviction sketches hold, and the
// most they may hold for a rule of maxKeys.
func (t *Table) SketchBytes(maxKeys int) (held, most int) {
	return t.sketchBytes(), len(t.shards) * sketchBytes(maxKeys/len(t.shards))
}
