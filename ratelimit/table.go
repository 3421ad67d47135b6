package ratelimit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"unsafe"
)

// table holds per-key state for one rule: shards of (mutex, map, LRU list),
// so concurrent requests for different keys rarely meet on a lock, and there
// is no global lock. Each shard holds at most its share of max_keys and
// evicts its least recently used key to admit a new one; keys idle long
// enough that their state equals a fresh one are dropped as they are met.
// It is plain Go with no Caddy imports; time is passed in.
type table struct {
	seed   maphash.Seed
	shards []shard
	mask   uint64
	keys   atomic.Int64
}

type shard struct {
	mu  sync.Mutex
	m   map[string]*entry
	lru entry // sentinel: lru.next is the most recent, lru.prev the least
	_   [40]byte
}

// entry is one key's state; the engine fields are used by one rule kind.
//
// A key of up to inlineKey bytes is kept in the entry itself (kbuf; key
// and the shard map's key point into it): no second allocation per new
// key, one object less per key for the GC to mark, and the map's key
// comparison on a lookup reads the entry's own memory, which the request
// reads next anyway (one cache miss instead of two over many keys). The
// fields a request touches come first, next to kbuf.
type entry struct {
	kbuf       [inlineKey]byte
	tb         tokenBucket
	seen       int64 // ns of the last request
	prev, next *entry
	key        string
	sw         slidingWindow
	inflight   int32       // requests admitted and not finished (max_concurrent)
	lease      *leaseState // cluster lease mode only
	pace       pacer       // control_behavior pace
	warm       warmBucket  // control_behavior warm_up, warm_up_pace
}

// inlineKey is the longest key held in the entry: 24 bytes fill the entry
// up to its 144-byte size class, the size the entry (128) and a separate
// key of up to 16 bytes took before.
const inlineKey = 24

// maxShards bounds lock striping; fewer shards are used for small max_keys so
// that the LRU stays close to exact (each shard evicts on its own).
const maxShards = 64

// shardsFor picks the number of shards for a max_keys cap: a power of two,
// at most 64, with at least 64 keys per shard.
func shardsFor(maxKeys int) int {
	n := 1
	for n < maxShards && maxKeys/(n*2) >= 64 {
		n *= 2
	}
	return n
}

func newTable(nshards int) *table {
	t := &table{seed: maphash.MakeSeed(), shards: make([]shard, nshards), mask: uint64(nshards - 1)}
	for i := range t.shards {
		s := &t.shards[i]
		s.m = make(map[string]*entry)
		s.lru.next, s.lru.prev = &s.lru, &s.lru
	}
	return t
}

func (t *table) shard(key []byte) *shard {
	if t.mask == 0 {
		return &t.shards[0]
	}
	return &t.shards[maphash.Bytes(t.seed, key)&t.mask]
}

// get returns key's entry in the locked shard s, creating it if needed
// (evicting the least recently used entry when the shard is full), and marks
// it most recently used. Entries idle for longer than idle ns are dropped
// from the cold end first, two at most per call, so the work stays O(1).
func (t *table) get(s *shard, key []byte, now, idle int64, perShard int) *entry {
	if e := s.m[string(key)]; e != nil {
		e.seen = now
		if s.lru.next != e {
			e.unlink()
			s.pushFront(e)
		}
		t.expire(s, now, idle, 2)
		return e
	}
	t.expire(s, now, idle, 2)
	for len(s.m) >= perShard && t.evictOldest(s) {
	}
	e := &entry{seen: now}
	if len(key) <= inlineKey {
		// kbuf is written only here, so it can back the key string.
		e.key = unsafe.String(&e.kbuf[0], copy(e.kbuf[:], key))
	} else {
		e.key = string(key)
	}
	s.m[e.key] = e
	s.pushFront(e)
	t.keys.Add(1)
	return e
}

// expire drops up to max entries idle for longer than idle ns.
func (t *table) expire(s *shard, now, idle int64, max int) {
	for i := 0; i < max; i++ {
		e := s.lru.prev
		if e == &s.lru || now-e.seen <= idle || e.inflight > 0 {
			return
		}
		t.remove(s, e)
	}
}

// evictOldest drops the least recently used entry, preferring one with no
// request in flight (so its concurrency count is not lost); it reports
// whether it dropped anything.
func (t *table) evictOldest(s *shard) bool {
	e := s.lru.prev
	for i := 0; i < 8 && e != &s.lru && e.inflight > 0; i++ {
		e = e.prev
	}
	if e == &s.lru {
		e = s.lru.prev
		if e == &s.lru {
			return false
		}
	}
	t.remove(s, e)
	return true
}

func (t *table) remove(s *shard, e *entry) {
	e.unlink()
	delete(s.m, e.key)
	t.keys.Add(-1)
}

// sweep drops every idle entry; the janitor calls it now and then so memory
// is returned even for keys never seen again.
func (t *table) sweep(now, idle int64) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		t.expire(s, now, idle, len(s.m))
		s.mu.Unlock()
	}
}

// scan calls fn on every entry, each shard locked only while it is read;
// fn must not keep e or change it.
func (t *table) scan(fn func(e *entry)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			fn(e)
		}
		s.mu.Unlock()
	}
}

func (s *shard) pushFront(e *entry) {
	e.prev, e.next = &s.lru, s.lru.next
	s.lru.next.prev = e
	s.lru.next = e
}

func (e *entry) unlink() {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}
