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

// splitRecorder keeps a rule's last splitRing records (replay.Ring: it
// grows from 64 records as it fills); the handler's default_version
// rides along.
type splitRecorder struct {
	ring replay.Ring[splitRecord]

	// dflt is the recording handler's default_version: the fallback of
	// a rule that sets none.
	dflt atomic.Pointer[string]
}

func newSplitRecorder() *splitRecorder {
	return &splitRecorder{ring: replay.Ring[splitRecord]{Max: splitRing}}
}

// add records one request.
func (s *splitRecorder) add(r splitRecord) { s.ring.Add(r) }

// since copies the records from from on, in arrival order, and reports
// whether the ring overwrote records at or after from (short).
func (s *splitRecorder) since(from int64) (out []splitRecord, short bool) {
	out, short = s.ring.Copy(func(r *splitRecord) bool { return r.At >= from })
	slices.SortStableFunc(out, func(a, b splitRecord) int { return cmp.Compare(a.At, b.At) })
	return out, short
}
