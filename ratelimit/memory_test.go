package ratelimit

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// bytesPerKey tracks n distinct per-user keys in one local engine whose
// max_keys has room for them all, and returns the live heap per tracked key.
func bytesPerKey(t testing.TB, n int) float64 {
	r := mustRule(t, rulestore.Fields{"qps": "10", "burst": "20", "max_keys": fmt.Sprint(2 * n)}) // room: shards fill unevenly
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e := newLocalEngine(r)
	key := make([]byte, 0, 32)
	now := sec
	for i := range n {
		key = fmt.Appendf(key[:0], "user-%d", i)
		e.Take(r, key, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := e.Keys(); got != int64(n) {
		t.Fatalf("tracking %d keys, want %d", got, n)
	}
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	runtime.KeepAlive(e)
	return per
}

// A million tracked keys stay within 200 bytes each (the table, its
// entries and the key strings; issue 16's budget).
func TestMemoryPerTrackedKey(t *testing.T) {
	if testing.Short() {
		t.Skip("tracks a million keys")
	}
	per := bytesPerKey(t, 1_000_000)
	t.Logf("1,000,000 tracked keys: %.0f bytes of heap per key", per)
	if per > 200 {
		t.Fatalf("%.0f bytes per tracked key, want at most 200", per)
	}
}

// BenchmarkMemoryPerKey reports the heap per tracked key at 1,000,000 keys.
func BenchmarkMemoryPerKey(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(bytesPerKey(b, 1_000_000), "B/key")
	}
}
