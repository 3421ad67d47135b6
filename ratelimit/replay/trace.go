package replay

import (
	"cmp"
	"slices"
)

// Trace is a copy of a recorder's records of one window, ready to
// replay: per shard, the records of the keys kept at the shard's highest
// sampling level in the window, in time order.
type Trace struct {
	From, To int64 // the window, engine ns
	Shards   [Shards]TraceShard
}

// TraceShard is one shard's part of a Trace. Each of its records stands
// for 1<<Level requests (consistent sampling by key keeps whole keys).
type TraceShard struct {
	Level   uint8
	Records []Record
	Names   map[uint64]string
	// Short: the ring had overwritten records of the window (traffic rose
	// faster than the sampling level followed), so it spans less.
	Short bool
}

// Snapshot copies the records of r's window ending at now. Each shard is
// locked while its ring is copied (a memory copy of at most the ring).
func (r *Recorder) Snapshot(now int64) *Trace {
	tr := &Trace{From: now - r.window, To: now}
	for i := range r.shards {
		tr.Shards[i] = r.shards[i].snapshot(tr.From, now)
	}
	return tr
}

func (s *shard) snapshot(from, to int64) TraceShard {
	s.mu.Lock()
	n := uint64(len(s.ring))
	first := s.next - min(s.next, n)
	recs := make([]Record, 0, s.next-first)
	short := first > 0 && s.ring[first&(n-1)].At > from
	var level uint8
	for i := first; i < s.next; i++ {
		if rec := s.ring[i&(n-1)]; rec.At > from && rec.At <= to {
			recs = append(recs, rec)
			level = max(level, rec.Level)
		}
	}
	names := s.names.all()
	s.mu.Unlock()
	// Records of a lower level hold keys the highest one dropped.
	recs = slices.DeleteFunc(recs, func(rec Record) bool { return rec.Key&(1<<level-1) != 0 })
	// Writers take their slot after reading the clock: nearly sorted.
	if !slices.IsSortedFunc(recs, byTime) {
		slices.SortStableFunc(recs, byTime)
	}
	return TraceShard{Level: level, Records: recs, Names: names, Short: short}
}

func byTime(a, b Record) int { return cmp.Compare(a.At, b.At) }

// Len is the number of records in tr.
func (tr *Trace) Len() int {
	n := 0
	for i := range tr.Shards {
		n += len(tr.Shards[i].Records)
	}
	return n
}

// Since narrows tr to the records after from (engine ns), for a preview
// of less than the recorder's window.
func (tr *Trace) Since(from int64) {
	if from <= tr.From {
		return
	}
	tr.From = from
	for i := range tr.Shards {
		recs := tr.Shards[i].Records
		j, _ := slices.BinarySearchFunc(recs, from+1, func(r Record, at int64) int { return cmp.Compare(r.At, at) })
		tr.Shards[i].Records = recs[j:]
	}
}
