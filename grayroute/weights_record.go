package grayroute

import (
	"slices"
	"sync"
	"sync/atomic"
)

// A gray rule's record of its recent split, for previews of its weights
// (weights_replay.go, docs/design/previews.md). Plain Go: the handler
// records into it (weights_glue.go).

// served is the version a recorded request went to.
type served uint8

const (
	servedFallback served = iota // outside the weight
	servedTarget                 // inside the weight
	servedForced                 // inside, sent to the fallback by fallback_on_open
)

// splitRecord is one request a gray rule split: 24 bytes, no pointer.
type splitRecord struct {
	At     int64  // arrival, wall ns
	Key    uint64 // the hash key's hash (mix64 of its FNV state); 0: none resolved
	Bucket uint32 // the key's bucket in [0, Buckets), or the random draw without a key
	Served served
}

// splitRing is the number of records a rule keeps at most: 768 KiB,
// 54 req/s for 10 minutes. A ring that overwrote records of a window
// says so.
const splitRing = 1 << 15

// splitRingMin is the ring's first size; it doubles as it fills, up to
// splitRing (ten allocations in a busy rule's life), so a rule that sees
// little traffic holds little.
const splitRingMin = 64

// splitRecorder keeps a rule's last splitRing records, written under a
// mutex; the handler's default_version rides along.
type splitRecorder struct {
	mu   sync.Mutex
	ring []splitRecord
	n    uint64 // records written, ever

	// dflt is the recording handler's default_version: the fallback of
	// a rule that sets none.
	dflt atomic.Pointer[string]
}

// add records one request.
func (s *splitRecorder) add(r splitRecord) {
	s.mu.Lock()
	if s.n == uint64(len(s.ring)) && len(s.ring) < splitRing {
		// Not wrapped yet: the records sit at 0..n-1 in order.
		grown := make([]splitRecord, max(splitRingMin, 2*len(s.ring)))
		copy(grown, s.ring)
		s.ring = grown
	}
	s.ring[s.n&uint64(len(s.ring)-1)] = r
	s.n++
	s.mu.Unlock()
}

// since copies the records from from on, in arrival order, and reports
// whether the ring overwrote records at or after from (short).
func (s *splitRecorder) since(from int64) (out []splitRecord, short bool) {
	s.mu.Lock()
	n, size := s.n, uint64(len(s.ring))
	held := min(n, size)
	out = make([]splitRecord, 0, held)
	for i := n - held; i < n; i++ {
		if r := s.ring[i&(size-1)]; r.At >= from {
			out = append(out, r)
		}
	}
	s.mu.Unlock()
	short = n > size && len(out) == int(held)
	slices.SortStableFunc(out, func(a, b splitRecord) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return out, short
}
