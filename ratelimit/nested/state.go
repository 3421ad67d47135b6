package nested

import "github.com/sluicegw/sluice/ratelimit/engine"

// State is one node's state: six numbers, no pointers, so a Redis hash
// can hold the same fields. The zero State is a new node: a full bucket,
// an empty window, a guarantee not yet granted.
type State struct {
	// The node's own pool, its ceiling, in its own kind.
	At       int64   // token bucket: last refill (ns); calendar: its window's start (Unix ns)
	Level    float64 // token bucket: tokens held (below zero: debt); calendar: units used in the window
	Reserved float64 // calendar: unclaimed guarantees of the children seen in the window

	// Its guarantee at its parent, in the parent's kind.
	GAt   int64   // token bucket parent: the guarantee's last refill; calendar parent: the parent's window it was granted in
	GLeft float64 // guaranteed tokens held, or guaranteed units still unclaimed in that window
	GUsed float64 // calendar parent: units spent within the guarantee in that window
}

// refresh brings the pool up to now: a bucket refills, a calendar window
// that has ended starts afresh (and so do its children's reserves).
func (s *State) refresh(l *Limit, now int64) {
	if l.Calendar == nil {
		b := engine.Bucket{Tokens: s.Level, Last: s.At}
		b.Refill(now, l.QPS, l.Burst)
		s.Level, s.At = b.Tokens, b.Last
		return
	}
	if w := l.Calendar.Window(now); s.At != w.Start {
		s.At, s.Level, s.Reserved = w.Start, 0, 0
	}
}

// free is what the refreshed pool holds for a spend that no guarantee
// covers: the tokens (below zero in debt), or the quota less the units
// used and the children's reserves.
func (s *State) free(l *Limit) float64 {
	if l.Calendar == nil {
		return s.Level
	}
	return l.Quota - s.Level - s.Reserved
}

// spend takes n from the refreshed pool, of which reserved came out of a
// child's reserve (calendar).
func (s *State) spend(l *Limit, n, reserved float64) {
	if l.Calendar == nil {
		s.Level -= n
		return
	}
	s.Level += n
	s.Reserved -= reserved
}

// take spends n of the node's own (a leaf's) pool if free holds it.
func (s *State) take(l *Limit, n float64) bool {
	if n > 0 && s.free(l) < n {
		return false
	}
	s.spend(l, n, 0)
	return true
}

// wait is a hint: the ns until the pool's Level reaches level (a
// bucket), or its window ends (a calendar).
func (s *State) wait(l *Limit, level float64, now int64) int64 {
	if l.Calendar == nil {
		return engine.CeilNanos((level - s.Level) / l.QPS)
	}
	return l.Calendar.Window(now).End - now
}
