package engine

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"unsafe"
)

// bytesPerKey tracks n distinct per-user keys in one local engine whose
// max_keys has room for them all, and returns the live heap per tracked key.
func bytesPerKey(t testing.TB, n int) float64 {
	r := bucket(10, 20, 2*n) // room: shards fill unevenly
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e := NewLocal(r)
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

// memoryDoc is docs/ratelimit.md's one statement of the memory a key
// costs: "about N bytes of heap: its E-byte table entry (a key of up to K
// bytes sits inside it".
var memoryDoc = regexp.MustCompile(`about (\d+) bytes of heap: its (\d+)-byte table entry\s+\(a key of up to (\d+) bytes sits inside it`)

// docMemory reads the three figures of docs/ratelimit.md's Memory section.
func docMemory(t *testing.T) (perKey, entryBytes, inline int) {
	t.Helper()
	raw, err := os.ReadFile("../../docs/ratelimit.md")
	if err != nil {
		t.Fatal(err)
	}
	m := memoryDoc.FindSubmatch(raw)
	if m == nil {
		t.Fatalf("docs/ratelimit.md: no %q", memoryDoc)
	}
	n := func(b []byte) int { v, _ := strconv.Atoi(string(b)); return v }
	return n(m[1]), n(m[2]), n(m[3])
}

// A million tracked keys stay within 200 bytes each (the table, its
// entries and the key strings), and docs/ratelimit.md states the figure
// measured, within a tenth.
func TestMemoryPerTrackedKey(t *testing.T) {
	if testing.Short() {
		t.Skip("tracks a million keys")
	}
	doc, _, _ := docMemory(t)
	per := bytesPerKey(t, 1_000_000)
	t.Logf("1,000,000 tracked keys: %.0f bytes of heap per key; the docs say about %d", per, doc)
	if per > 200 {
		t.Fatalf("%.0f bytes per tracked key, want at most 200", per)
	}
	if per < float64(doc)*0.9 || per > float64(doc)*1.1 {
		t.Errorf("docs/ratelimit.md says about %d bytes per key, measured %.0f: update the docs", doc, per)
	}
}

// The entry size and the longest key held inside it are what
// docs/ratelimit.md says.
func TestEntrySizeAsDocumented(t *testing.T) {
	_, entryBytes, inline := docMemory(t)
	if got := int(unsafe.Sizeof(entry{})); got != entryBytes {
		t.Errorf("an entry is %d bytes, docs/ratelimit.md says %d", got, entryBytes)
	}
	if inlineKey != inline {
		t.Errorf("keys of up to %d bytes sit in the entry, docs/ratelimit.md says %d", inlineKey, inline)
	}
}

// BenchmarkMemoryPerKey reports the heap per tracked key at 1,000,000 keys.
func BenchmarkMemoryPerKey(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(bytesPerKey(b, 1_000_000), "B/key")
	}
}
