package circuitbreaker

import (
	"sync"
	"sync/atomic"
)

// window counts calls, failures and slow calls over the last WindowCount
// calls (a ring of outcomes) or the last WindowDuration (a ring of time
// buckets). Totals are kept alongside, so a check reads three counters.
type window struct {
	calls, failures, slows atomic.Int64

	// count window
	outcomes []atomic.Uint32 // bit 0: a call, bit 1: failed, bit 2: slow
	pos      atomic.Uint64

	// time window
	width   int64 // nanoseconds per bucket
	buckets []bucket
	head    atomic.Int64 // index of the newest bucket
	mu      sync.Mutex   // serialises moving head
}

type bucket struct{ calls, failures, slows atomic.Int64 }

func newWindow(s *Settings) *window {
	w := new(window)
	if s.WindowCount > 0 {
		w.outcomes = make([]atomic.Uint32, s.WindowCount)
		return w
	}
	w.buckets = make([]bucket, timeBuckets)
	w.width = max(int64(s.WindowDuration)/timeBuckets, 1)
	return w
}

// add records one call and returns the window's totals.
func (w *window) add(now func() int64, failed, slow bool) (calls, failures, slows int64) {
	var f, sl int64
	if failed {
		f = 1
	}
	if slow {
		sl = 1
	}
	if w.outcomes != nil {
		enc := uint32(1 | f<<1 | sl<<2)
		n := uint64(len(w.outcomes))
		old := w.outcomes[(w.pos.Add(1)-1)%n].Swap(enc)
		w.bump(int64(1-old&1), f-int64(old>>1&1), sl-int64(old>>2&1))
	} else {
		idx := now() / w.width
		head := w.head.Load()
		if idx > head {
			w.advance(idx)
		} else if idx <= head-timeBuckets {
			return w.totals() // older than the window
		}
		bk := &w.buckets[idx%timeBuckets]
		bk.calls.Add(1)
		if f != 0 {
			bk.failures.Add(1)
		}
		if sl != 0 {
			bk.slows.Add(1)
		}
		w.bump(1, f, sl)
	}
	return w.totals()
}

func (w *window) bump(c, f, s int64) {
	if c != 0 {
		w.calls.Add(c)
	}
	if f != 0 {
		w.failures.Add(f)
	}
	if s != 0 {
		w.slows.Add(s)
	}
}

func (w *window) totals() (int64, int64, int64) {
	return w.calls.Load(), w.failures.Load(), w.slows.Load()
}

// advance moves head to idx, emptying the buckets that fell out.
func (w *window) advance(idx int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	head := w.head.Load()
	for i := max(head+1, idx-timeBuckets+1); i <= idx; i++ {
		bk := &w.buckets[i%timeBuckets]
		w.bump(-bk.calls.Swap(0), -bk.failures.Swap(0), -bk.slows.Swap(0))
	}
	if idx > head {
		w.head.Store(idx)
	}
}
