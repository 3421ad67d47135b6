package nested

import (
	"fmt"
	"strconv"
	"strings"
)

// Share is one child's declared guarantee, as ValidateShares reads it.
type Share struct {
	Child   string  // the child as the operator names it: a rule id, or a rule id and key
	Field   string  // the field that declares it, e.g. "guarantee"
	Percent float64 // of the parent's rate or quota
}

// SharesError says which declared guarantees of one parent's children are
// wrong: one out of range, or together over 100 %.
type SharesError struct {
	Parent     string
	Shares     []Share // the offending shares: the one out of range, or all the parent's non-zero ones
	Total      float64 // their sum, in percent
	OutOfRange bool    // the one share is below 0, over 100 or not a number
}

func (e *SharesError) Error() string {
	var b strings.Builder
	if e.OutOfRange {
		s := e.Shares[0]
		fmt.Fprintf(&b, "%s: %s %s%% of %s: a guarantee is 0 to 100%%", s.Child, s.Field, pct(s.Percent), e.Parent)
		return b.String()
	}
	fmt.Fprintf(&b, "the guarantees of %s's children add up to %s%%, over 100%%:", e.Parent, pct(e.Total))
	for i, s := range e.Shares {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s %s %s%%", s.Child, s.Field, pct(s.Percent))
	}
	return b.String()
}

func pct(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }

// ValidateShares checks the declared guarantees of one parent's children:
// each is 0 to 100 %, and together they are at most 100 % (with a margin
// for decimal fractions, 1e-9 %). It returns a *SharesError naming the
// offending children and fields, or nil.
func ValidateShares(parent string, shares []Share) error {
	total := 0.0
	for _, s := range shares {
		if !(s.Percent >= 0 && s.Percent <= 100) { // also NaN
			return &SharesError{Parent: parent, Shares: []Share{s}, Total: s.Percent, OutOfRange: true}
		}
		total += s.Percent
	}
	if total > 100+1e-9 {
		var named []Share
		for _, s := range shares {
			if s.Percent > 0 {
				named = append(named, s)
			}
		}
		return &SharesError{Parent: parent, Shares: named, Total: total}
	}
	return nil
}
