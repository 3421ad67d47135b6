package grayroute

import "testing"

// A count once made is found again without allocating, so the request
// path's lookups (random splits, a changed fallback) stay free.
func TestCounterLookupDoesNotAllocate(t *testing.T) {
	v := newCounterVec(metrics.random.desc, 1)
	c := v.WithLabelValues("alloc-rule")
	if n := testing.AllocsPerRun(100, func() { v.WithLabelValues("alloc-rule").Inc() }); n != 0 {
		t.Fatalf("%v allocations per lookup", n)
	}
	if c.Load() != 101 { // AllocsPerRun runs once more to warm up
		t.Fatalf("count %d, want 101", c.Load())
	}
}
