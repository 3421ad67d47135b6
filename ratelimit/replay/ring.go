package replay

import (
	"sync"
	"sync/atomic"
)

// Words is one record of a Ring: three 64-bit words, packed and unpacked
// by the kind that records (gray splits, breaker calls).
type Words = [3]uint64

// Ring keeps the last Max records added (a power of two), for the kinds
// whose traffic needs no sampling. Writers do not wait: a writer claims
// record i with one atomic add, stores its words, then the slot's
// sequence number (i+1) with atomic stores, so a copy taken while writers
// write is clean under the race detector and drops the slots being
// written (a slot's number not yet i+1, or a writer of i+Max already
// claimed). Its buffer starts at 64 records and doubles as it fills, so a
// rule that sees little traffic holds little; a record written into the
// old buffer while it grows may be lost (the copy drops its slot). The
// zero value with Max set is ready; Width is the words a record uses (2
// or 3; 0 means 3): each costs a store.
type Ring struct {
	Max   int
	Width int

	n    atomic.Uint64          // records claimed, ever
	buf  atomic.Pointer[[]slot] // len a power of two, at most Max
	grow sync.Mutex             // held while the buffer grows
}

// slot is one record and its sequence number: i+1 once record i is
// written.
type slot struct {
	seq atomic.Uint64
	w   [3]atomic.Uint64
}

// ringMin is a Ring's first size.
const ringMin = 64

// Add keeps w, overwriting the oldest record once the ring holds Max.
func (r *Ring) Add(w Words) {
	i := r.n.Add(1) - 1
	p := r.buf.Load()
	if p == nil || (i >= uint64(len(*p)) && len(*p) < r.Max) {
		p = r.grown(i)
	}
	s := &(*p)[i&uint64(len(*p)-1)]
	s.w[0].Store(w[0])
	s.w[1].Store(w[1])
	if r.Width != 2 {
		s.w[2].Store(w[2])
	}
	s.seq.Store(i + 1)
}

// grown returns a buffer that holds record i, growing the ring's.
func (r *Ring) grown(i uint64) *[]slot {
	r.grow.Lock()
	defer r.grow.Unlock()
	p := r.buf.Load()
	if p != nil && (i < uint64(len(*p)) || len(*p) >= r.Max) {
		return p
	}
	size := ringMin
	if p != nil {
		size = len(*p)
	}
	for uint64(size) <= i && size < r.Max {
		size *= 2
	}
	size = min(size, r.Max)
	next := make([]slot, size)
	if p != nil {
		// Not wrapped yet: the records sit at 0..len-1 in order.
		for j := range *p {
			next[j].seq.Store((*p)[j].seq.Load())
			for k := range next[j].w {
				next[j].w[k].Store((*p)[j].w[k].Load())
			}
		}
	}
	r.buf.Store(&next)
	return &next
}

// Copy returns the records keep accepts, oldest first, and whether the
// ring overwrote records while keep accepts every record it holds (the
// records asked for span more than the ring). A slot being written, or
// lost while the ring grew, is left out.
func (r *Ring) Copy(keep func(Words) bool) (out []Words, short bool) {
	p := r.buf.Load()
	if p == nil {
		return nil, false
	}
	n, size := r.n.Load(), uint64(len(*p))
	held := min(n, size)
	out = make([]Words, 0, held)
	all := true
	for i := n - held; i < n; i++ {
		w, ok := (*p)[i&(size-1)].read(i)
		if !ok || r.n.Load() > i+size {
			continue // being written, or overwritten since
		}
		if keep(w) {
			out = append(out, w)
		} else {
			all = false
		}
	}
	// Only a full ring overwrites: a copy of a smaller one taken while it
	// grew may miss records, but none was overwritten.
	return out, n > size && size == uint64(r.Max) && all
}

// read returns the slot's words if it holds record i, written (Copy
// checks that no writer of a later record took the slot meanwhile).
func (s *slot) read(i uint64) (w Words, ok bool) {
	if s.seq.Load() != i+1 {
		return w, false
	}
	for k := range w {
		w[k] = s.w[k].Load()
	}
	return w, true
}
