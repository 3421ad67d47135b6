package replay

import "sync"

// Ring keeps the last Max values added (a power of two), for the records
// of the kinds whose traffic needs no sampling (gray splits, breaker
// calls). Its buffer starts at 64 values and doubles as it fills, so a
// rule that sees little traffic holds little; a mutex guards it. The
// zero value with Max set is ready.
type Ring[T any] struct {
	Max int

	mu  sync.Mutex
	buf []T
	n   uint64 // values added, ever
}

// ringMin is a Ring's first size.
const ringMin = 64

// Add keeps v, overwriting the oldest value once the ring holds Max.
func (r *Ring[T]) Add(v T) {
	r.mu.Lock()
	if r.n == uint64(len(r.buf)) && len(r.buf) < r.Max {
		// Not wrapped yet: the values sit at 0..n-1 in order.
		grown := make([]T, min(r.Max, max(ringMin, 2*len(r.buf))))
		copy(grown, r.buf)
		r.buf = grown
	}
	r.buf[r.n&uint64(len(r.buf)-1)] = v
	r.n++
	r.mu.Unlock()
}

// Copy returns the values keep accepts, oldest first, and whether the
// ring overwrote values while keep accepts every value it holds (the
// values asked for span more than the ring).
func (r *Ring[T]) Copy(keep func(*T) bool) (out []T, short bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, size := r.n, uint64(len(r.buf))
	held := min(n, size)
	out = make([]T, 0, held)
	for i := n - held; i < n; i++ {
		if v := &r.buf[i&(size-1)]; keep(v) {
			out = append(out, *v)
		}
	}
	return out, n > size && len(out) == int(held)
}
