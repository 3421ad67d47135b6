package handlerkit

import (
	"time"

	"github.com/sluicegw/sluice/rulestore/syntax"
)

// fieldErrors is a kind's parse state: it names the field being read in
// an error (a *FieldReader does, and every parse state embeds one).
type fieldErrors interface {
	Errorf(format string, args ...any) error
}

// WholeRow is a whole number from lo to hi: its Syntax, its Bounds and
// its parse come from the one range. note follows the range in the error
// message (what 0 means, say).
func WholeRow[P fieldErrors](name, def string, lo, hi int64, note string, set func(p P, n int64)) Field[P] {
	return Row(name, "int, "+syntax.Span(lo, hi), def, func(p P, v string) error {
		n, ok := syntax.ParseWhole(v, lo, hi)
		if !ok {
			return p.Errorf("want a whole number %s%s", syntax.Range(lo, hi), note)
		}
		set(p, n)
		return nil
	}).In(syntax.WholeBounds(lo, hi))
}

// DurationRow is a Go duration from lo to hi, its Syntax, Bounds and
// parse from the one range; example, if any, follows the range in the
// error message.
func DurationRow[P fieldErrors](name, def string, lo, hi time.Duration, example string, set func(p P, d time.Duration)) Field[P] {
	want := "want a duration from " + syntax.DocDuration(lo) + " to " + syntax.DocDuration(hi)
	if example != "" {
		want += " (e.g. " + example + ")"
	}
	return Row(name, "duration, "+syntax.SpanDuration(lo, hi), def, func(p P, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < lo || d > hi {
			return p.Errorf("%s", want)
		}
		set(p, d)
		return nil
	}).In(syntax.DurationBounds(lo, hi))
}
