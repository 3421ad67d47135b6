package nested

import "github.com/sluicegw/sluice/ratelimit/engine"

// MaxDepth is the most levels a path may have (a leaf and its ancestors).
const MaxDepth = 8

// Limit is a node's ceiling: a token bucket of QPS tokens a second up to
// Burst, or, when Calendar is set, Quota units per calendar window.
type Limit struct {
	QPS, Burst float64
	Quota      float64
	Calendar   *engine.CalendarQuota
}

// capacity is the pool's size: the quota, or the burst.
func (l *Limit) capacity() float64 {
	if l.Calendar != nil {
		return l.Quota
	}
	return l.Burst
}

// Node is one key at one level of a spend's path: its ceiling, its
// guarantee at its parent, and its state, which the caller keeps and
// serialises access to for the whole path.
type Node struct {
	Limit *Limit
	// Guarantee is the node's share of its parent's rate (or quota),
	// from 0 to 1; 0 means none: the node only borrows. The root's is
	// not read.
	Guarantee float64
	State     *State
}
