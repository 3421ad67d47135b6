package replay

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Shards is the recorder's number of rings. A key's records all go to
// one shard (by the top bits of its hash), so shards share no key and
// each samples on its own; writers of different keys rarely meet on a
// lock.
const Shards = 8

const (
	// DefaultWindow is how far back a recorder keeps traffic.
	DefaultWindow = int64(10 * time.Minute)
	// DefaultRecords bounds a rule's ring: 2¹⁸ records of 32 bytes, 8 MiB
	// (plus 256 KiB of key names). It holds 437 req/s for 10 minutes
	// unsampled.
	DefaultRecords = 1 << 18
	// maxLevel bounds sampling at 1 key in 2¹⁶.
	maxLevel = 16
)

// Recorder keeps a rule's recent traffic: for each shard a ring of
// records, oldest overwritten first. When a shard's ring fills faster
// than its window, it keeps only the keys whose hash ends in one more
// zero bit (its level rises), so its ring spans the window again; when
// it fills in less than half as fast, the level falls.
//
// A shard's ring starts small and doubles as it fills, up to its bound,
// and its name table is made on its first record: a rule that sees little
// traffic holds little memory. Bytes is the bound.
type Recorder struct {
	window int64
	per    int // a shard's ring at its bound, a power of two
	shards [Shards]shard
}

type shard struct {
	mu    sync.Mutex
	level atomic.Uint32 // keep a key when hash&(1<<level−1) == 0
	next  uint64        // records written, under mu
	ring  []Record      // a power of two long, up to Recorder.per
	names *nameTable    // nil before the shard's first record
	_     [64]byte      // keeps the hot locks of neighbours off one cache line
}

// firstRing is a shard's ring before it grows.
const firstRing = 64

// NewRecorder makes a recorder of window ns holding about records
// records (rounded up to a power of two per shard).
func NewRecorder(window int64, records int) *Recorder {
	if window <= 0 {
		window = DefaultWindow
	}
	if records <= 0 {
		records = DefaultRecords
	}
	per := 1 << bits.Len(uint(max(records/Shards, 2)-1))
	r := &Recorder{window: window, per: per}
	for i := range r.shards {
		r.shards[i].ring = make([]Record, min(per, firstRing))
	}
	return r
}

// Bytes bounds the memory the recorder holds: its rings and name tables
// once grown to their bound.
func (r *Recorder) Bytes() int {
	return Shards * (r.per*recordBytes + nameSlots*nameSlotBytes)
}

// Window is how far back r keeps traffic, ns.
func (r *Recorder) Window() int64 { return r.window }

const recordBytes = 32

// Record notes one decided request of key. It does not allocate; a key
// its shard does not sample costs a hash and an atomic load.
func (r *Recorder) Record(key []byte, a Arrival) {
	h := keyHash(key)
	s := &r.shards[h>>(64-3)]
	if h&(1<<s.level.Load()-1) != 0 {
		return
	}
	s.mu.Lock()
	level := s.level.Load()
	if h&(1<<level-1) != 0 { // the level rose meanwhile
		s.mu.Unlock()
		return
	}
	i := s.next
	s.next++
	if i == uint64(len(s.ring)) && len(s.ring) < r.per {
		s.grow()
	}
	mask := uint64(len(s.ring) - 1)
	if per := uint64(r.per); per >= 8 && i&(per/8-1) == 0 && i >= per/8 {
		level = s.adapt(a.At, i, per, r.window)
	}
	s.ring[i&mask] = Record{At: a.At, Key: h, Cost: clip32(a.Cost), Total: clip32(a.TotalInFlight),
		KeyIn: clip16(a.KeyInFlight), Outcome: a.Outcome, Level: uint8(level)}
	if s.names == nil {
		s.names = new(nameTable)
	}
	s.names.note(h, key)
	s.mu.Unlock()
}

// grow doubles the shard's ring while it has not wrapped yet (its
// records sit in order from index 0). The caller holds s.mu.
func (s *shard) grow() {
	ring := make([]Record, 2*len(s.ring))
	copy(ring, s.ring)
	s.ring = ring
}

// adapt sets the shard's level at write i (every eighth of the ring),
// from the time the last eighth took to fill, all at the current level:
// one higher when it took less than an eighth of the window (the ring
// would span less than the window), one lower when it took more than a
// quarter (at the lower level the ring would still span the window). The
// caller holds s.mu.
//
// n is the ring's bound: a ring still growing holds every record since
// the first (it has not wrapped), so the eighth is read from it alike.
func (s *shard) adapt(now int64, i, n uint64, window int64) uint32 {
	level := s.level.Load()
	took := now - s.ring[(i-n/8)&uint64(len(s.ring)-1)].At
	switch {
	case took < window/8 && level < maxLevel:
		level++
	case took > window/4 && level > 0:
		level--
	default:
		return level
	}
	s.level.Store(level)
	return level
}
