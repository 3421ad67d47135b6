package engine

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkTable is one table lookup (the shard's lock held, as the
// engine holds it) over a million-key table's share of keys, 10,000 or
// 100,000 keys: the map lookup and the LRU move to the front, whose cost
// is mostly cache misses once the keys outgrow the cache. A fresh key
// (evicting the oldest at max_keys) is the other case.
func BenchmarkTable(b *testing.B) {
	for _, nkeys := range []int{10_000, 100_000} {
		keys := make([][]byte, nkeys)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "user:%d", i)
		}
		b.Run(fmt.Sprintf("hit/keys=%d", nkeys), func(b *testing.B) {
			t := NewTable(ShardsFor(1_000_000))
			per := 1_000_000 / len(t.shards)
			for _, k := range keys {
				s := t.Shard(k)
				t.get(s, k, sec, sec, per)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := keys[(i*7919)%nkeys]
				s := t.Shard(k)
				s.mu.Lock()
				t.get(s, k, sec, sec, per)
				s.mu.Unlock()
			}
		})
	}
	b.Run("miss-evict/max_keys=10000", func(b *testing.B) {
		t := NewTable(ShardsFor(10_000))
		per := 10_000 / len(t.shards)
		key := make([]byte, 0, 32)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			key = fmt.Appendf(key[:0], "user:%d", i)
			s := t.Shard(key)
			s.mu.Lock()
			t.get(s, key, sec, sec, per)
			s.mu.Unlock()
		}
	})
}

// BenchmarkTableHeapObjects reports the heap objects that 10,000 tracked
// keys add (each one a thing the GC marks on every cycle) and the bytes.
func BenchmarkTableHeapObjects(b *testing.B) {
	for b.Loop() {
		objs, bytes := tableHeap(b, 10_000)
		b.ReportMetric(objs, "objects")
		b.ReportMetric(bytes/10_000, "B/key")
	}
}

// tableHeap tracks n keys in a local engine with the default max_keys and
// returns the live heap objects and bytes that it adds.
func tableHeap(tb testing.TB, n int) (objects, bytes float64) {
	r := bucket(10, 20, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e := NewLocal(r)
	key := make([]byte, 0, 32)
	for i := range n {
		key = fmt.Appendf(key[:0], "user-%d", i)
		e.Take(r, key, sec)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := e.Keys(); got != int64(n) {
		tb.Fatalf("tracking %d keys, want %d", got, n)
	}
	runtime.KeepAlive(e)
	return float64(after.HeapObjects) - float64(before.HeapObjects), float64(after.HeapAlloc) - float64(before.HeapAlloc)
}
