package nested

// Outcome is what one spend (or a read of use) found at each level of its
// path: what a quota API shows per level, and which level refused.
type Outcome struct {
	Depth int // levels in the path; Levels[0] is the leaf
	// Refused is the level that refused the spend, -1 when allowed: the
	// leaf over its ceiling, or a parent with nothing to lend.
	Refused int
	// Wait is a hint when refused: ns until the refusing level would
	// allow the spend, if nothing else spends meanwhile.
	Wait   int64
	Levels [MaxDepth]Level
}

// OK reports whether the spend was allowed at every level.
func (o *Outcome) OK() bool { return o.Refused < 0 }

// Level is one node's part in a spend and its use after it (before it,
// when refused).
type Level struct {
	// This spend's parts at the node's parent: within the node's
	// guarantee, and borrowed from the parent's unused pool. Both are 0
	// at the root, and when refused.
	Guaranteed, Borrowed float64
	// Used is the node's use of its ceiling: units used in its calendar
	// window, or tokens spent and not yet refilled (over Ceiling: the
	// bucket is in debt for its children's guarantees).
	Used float64
	// Ceiling is the node's quota, or its bucket's burst.
	Ceiling float64
	// Remaining is what a spend no guarantee covers could still take
	// here: the quota less the units used and the children's reserves,
	// or the tokens held (never below 0).
	Remaining float64
	// GuaranteeLeft is the node's guarantee at its parent not yet spent:
	// guaranteed tokens held, or units unclaimed in the parent's window
	// (in a window the node has not spent in yet, Usage shows what it
	// would be granted now).
	GuaranteeLeft float64
	// GuaranteedUsed (calendar parent) is the units the node spent within
	// its guarantee in the parent's window.
	GuaranteedUsed float64
}

// show fills lv's use from the node's refreshed state s.
func (lv *Level) show(s *State, l *Limit) {
	lv.Ceiling = l.capacity()
	lv.Remaining = max(s.free(l), 0)
	if l.Calendar != nil {
		lv.Used = s.Level
	} else {
		lv.Used = l.Burst - s.Level
	}
	lv.GuaranteeLeft = max(s.GLeft, 0)
	lv.GuaranteedUsed = s.GUsed
}
