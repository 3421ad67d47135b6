package replay

import (
	"sync"
	"testing"
	"time"
)

// Writers add while copies are taken (and the ring grows and wraps): every
// copied record is whole, each copy is in claim order, and once the
// writers are done the ring holds its last Max records.
func TestRingConcurrent(t *testing.T) {
	r := &Ring{Max: 1 << 10}
	const writers, each = 4, 5000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				v := uint64(w*each + i + 1)
				r.Add(Words{v, ^v, v * 3})
			}
		})
	}
	copies := 0
	for done := false; !done; copies++ {
		done = r.n.Load() == writers*each
		out, _ := r.Copy(func(Words) bool { return true })
		if len(out) > r.Max {
			t.Fatalf("copy of %d records from a ring of %d", len(out), r.Max)
		}
		for _, w := range out {
			if w[1] != ^w[0] || w[2] != w[0]*3 {
				t.Fatalf("torn record %x", w)
			}
		}
	}
	wg.Wait()
	out, short := r.Copy(func(Words) bool { return true })
	if len(out) != r.Max || !short {
		t.Errorf("after %d records: %d held (short %v), want %d (short)", writers*each, len(out), short, r.Max)
	}
	t.Logf("%d copies while writing", copies)
}

// A ring of two-word records and a filter: the records kept, oldest
// first, and short only when the filter keeps all and the ring wrapped.
func TestRingWidthAndFilter(t *testing.T) {
	r := &Ring{Max: 128, Width: 2}
	for i := range 100 {
		r.Add(Words{uint64(i), uint64(i) + 7, 99})
	}
	out, short := r.Copy(func(w Words) bool { return w[0] >= 90 })
	if len(out) != 10 || out[0][0] != 90 || out[9][1] != 106 || out[0][2] != 0 || short {
		t.Errorf("got %v short %v", out, short)
	}
	for i := 100; i < 300; i++ {
		r.Add(Words{uint64(i), 0})
	}
	if out, short := r.Copy(func(Words) bool { return true }); len(out) != 128 || out[0][0] != 172 || !short {
		t.Errorf("wrapped: %d records from %v, short %v", len(out), out[0], short)
	}
	if out, short := r.Copy(func(w Words) bool { return w[0] >= 250 }); len(out) != 50 || short {
		t.Errorf("filtered: %d records, short %v", len(out), short)
	}
}

// The coarse clock reads the wall clock within a wide bound, moves on,
// and starts again after it stopped unread.
func TestClockCoarse(t *testing.T) {
	c := &Clock{Tick: time.Millisecond}
	first := c.Now()
	if d := time.Since(time.Unix(0, first)); d < -time.Second || d > time.Second {
		t.Fatalf("clock off by %v", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Now() == first {
		if time.Now().After(deadline) {
			t.Fatal("clock did not move in 10s")
		}
		time.Sleep(time.Millisecond) // sleep: polls the clock for its next tick, with a deadline
	}
	for c.running.Load() {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("clock still running 10s after its last read")
		}
		time.Sleep(10 * time.Millisecond) // sleep: polls for the goroutine to stop, with a deadline
	}
	if d := time.Since(time.Unix(0, c.Now())); d < -time.Second || d > time.Second {
		t.Errorf("restarted clock off by %v", d)
	}
}
