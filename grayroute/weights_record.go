package grayroute

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/sluicegw/sluice/ratelimit/replay"
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

// splitRecord is one request a gray rule split; the ring keeps it in two
// words (add).
type splitRecord struct {
	At     int64  // arrival, wall ns (the store's coarse RecordClock)
	Key    uint64 // the hash key's hash (46 bits of mix64 of its FNV state); 0: none resolved
	Bucket uint32 // the key's bucket in [0, Buckets), or a random draw without a key
	Served served
	// Drawn: split at weight 0 or 100, which resolves no key; Bucket is
	// a draw made for the record.
	Drawn bool
}

// splitRing is the number of records a rule keeps at most: 1 MiB (32-byte
// slots),
// 54 req/s for 10 minutes. A ring that overwrote records of a window
// says so.
const splitRing = 1 << 15

// splitRecorder keeps a rule's last splitRing records (replay.Ring: it
// grows from 64 records as it fills, and its writers do not wait); the
// handler's default_version rides along.
type splitRecorder struct {
	ring replay.Ring

	// dflt is the recording handler's default_version: the fallback of
	// a rule that sets none.
	dflt atomic.Pointer[string]
}

func newSplitRecorder() *splitRecorder {
	return &splitRecorder{ring: replay.Ring{Max: splitRing, Width: 2}}
}

// The second word of a record: the bucket (14 bits), served (2), drawn
// (1), and the key's hash from bit keyShift (its top 46 bits, odd: 0 is
// no key). Two words, two stores: each costs some ns on the request path.
const (
	bucketBits = 1<<14 - 1
	servedAt   = 14
	drawnBit   = 1 << 16
	keyShift   = 18
)

// add records one request.
func (s *splitRecorder) add(r splitRecord) {
	w := uint64(r.Bucket)&bucketBits | uint64(r.Served)<<servedAt
	if r.Drawn {
		w |= drawnBit
	}
	if r.Key != 0 {
		w |= (r.Key>>keyShift | 1) << keyShift
	}
	s.ring.Add(replay.Words{uint64(r.At), w})
}

// since copies the records from from on, in arrival order, and reports
// whether the ring overwrote records at or after from (short).
func (s *splitRecorder) since(from int64) (out []splitRecord, short bool) {
	ws, short := s.ring.Copy(func(w replay.Words) bool { return int64(w[0]) >= from })
	out = make([]splitRecord, len(ws))
	for i, w := range ws {
		out[i] = splitRecord{At: int64(w[0]), Key: w[1] >> keyShift, Bucket: uint32(w[1] & bucketBits),
			Served: served(w[1] >> servedAt & 3), Drawn: w[1]&drawnBit != 0}
	}
	slices.SortStableFunc(out, func(a, b splitRecord) int { return cmp.Compare(a.At, b.At) })
	return out, short
}
