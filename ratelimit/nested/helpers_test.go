package nested

import (
	"testing"
	"time"
)

const sec = int64(time.Second)

// t0 is the tests' first instant: noon UTC, mid-window for a day quota.
var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC).UnixNano()

func bucket(qps, burst float64) *Limit { return &Limit{QPS: qps, Burst: burst} }

// stream is one leaf's demand: a spend of n every `every` ns from start.
type stream struct {
	path  []Node
	every int64
	n     float64
	next  int64
	// what happened to it
	admitted   float64
	guaranteed float64 // at its first parent
	borrowed   float64
	refusedAt  [MaxDepth]int
}

// run plays the streams' demand in time order until end, the earliest
// stream first on a tie (deterministic).
func run(t *testing.T, end int64, streams ...*stream) {
	t.Helper()
	for _, s := range streams {
		if s.next == 0 {
			s.next = t0
		}
	}
	for {
		var s *stream
		for _, c := range streams {
			if c.every > 0 && c.next < end && (s == nil || c.next < s.next) {
				s = c
			}
		}
		if s == nil {
			return
		}
		var out Outcome
		if Spend(s.path, s.n, s.next, &out) {
			s.admitted += s.n
			s.guaranteed += out.Levels[0].Guaranteed
			s.borrowed += out.Levels[0].Borrowed
		} else {
			s.refusedAt[out.Refused]++
		}
		s.next += s.every
	}
}

// at is the demand of rate per second as a stream's interval.
func at(rate float64) int64 { return int64(float64(sec) / rate) }
