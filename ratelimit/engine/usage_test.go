package engine

import (
	"math"
	"testing"
)

// What the admin API reads is what a request would meet: remaining and
// available agree with take at the same moment, and reading changes
// nothing.
func TestReadsAgreeWithTake(t *testing.T) {
	const size, limit = int64(4e9), 10.0
	var w slidingWindow
	for i := range 14 { // spread over four windows, so prev is weighted
		w.take(int64(i)*int64(1e9)+3e8, size, limit, 1)
	}
	for _, now := range []int64{14e9, 14.5e9, 15.9e9, 16e9, 21e9} {
		before := w
		r := w.remaining(now, size, limit)
		if w != before {
			t.Fatalf("remaining at %d moved the window: %+v, was %+v", now, w, before)
		}
		probe := w
		ok, left, _ := probe.take(now, size, limit, 1)
		if ok != (r >= 1) || ok && left != math.Floor(r-1) {
			t.Errorf("at %d: remaining %v, take ok=%v left %v", now, r, ok, left)
		}
	}

	var b tokenBucket
	b.take(1e9, 2, 5, 4)
	for _, now := range []int64{1e9, 1.3e9, 2e9, 9e9} {
		before := b
		a := b.available(now, 2, 5)
		if b != before {
			t.Fatalf("available at %d changed the bucket", now)
		}
		probe := b
		ok, left, _ := probe.take(now, 2, 5, 1)
		if ok != (a >= 1) || ok && left != math.Floor(a-1) {
			t.Errorf("at %d: available %v, take ok=%v left %v", now, a, ok, left)
		}
	}
}
