package engine

import "testing"

// A sketch lookup never counts less than the key left, whatever else was
// merged into its cells; sliding-window traces merge by window.
func TestSketchNeverUnderCounts(t *testing.T) {
	var k evictSketch
	left := map[uint64]uint64{}
	for i := range uint64(20_000) {
		h := spread(i + 1) // any 64-bit hashes
		v := 1 + i%1000
		k.add(h, v, traceMax, 1000)
		left[h] = max(left[h], v)
	}
	for h, v := range left {
		if got := least(k.rows(h)); got < v {
			t.Fatalf("hash %x left %d, sketch says %d", h, v, got)
		}
	}
	if got := len(k.cells); got != sketchRows*sketchWidth(1000) {
		t.Fatalf("%d cells, want %d", got, sketchRows*sketchWidth(1000))
	}
	for _, c := range []struct{ a, b, want uint64 }{
		{packTrace(7, 5), packTrace(7, 3), packTrace(7, 5)},
		{packTrace(7, 5), packTrace(8, 3), packTrace(8, 5)}, // adjacent: later window, larger estimate
		{packTrace(8, 3), packTrace(7, 5), packTrace(8, 5)},
		{packTrace(5, 9), packTrace(8, 3), packTrace(8, 3)}, // the old one slid out
		{0, packTrace(8, 3), packTrace(8, 3)},
		{packTrace(1<<32-1, 4), packTrace(0, 2), packTrace(0, 4)}, // the index wrapped
	} {
		if got := mergeWindow(c.a, c.b); got != c.want {
			t.Errorf("mergeWindow(%x, %x) = %x, want %x", c.a, c.b, got, c.want)
		}
	}
}
