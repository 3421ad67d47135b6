package syntax

import (
	"math"
	"strconv"
	"time"
)

// Unit is what a numeric field counts in: it says how its bounds are
// written in the rule's syntax.
type Unit uint8

const (
	WholeUnit    Unit = iota // an integer
	NumberUnit               // a decimal number
	DurationUnit             // a Go duration; Bounds in nanoseconds
)

// Bounds are a numeric field's documented range, declared once in its
// row of the kind's field table: the row's parser checks the same bounds,
// and the bounds test (faults) tries each numeric row at Extremes, which
// must pass, and at Outside, which must fail naming the field.
type Bounds struct {
	Unit   Unit
	Lo, Hi float64
	// LoOpen: Lo itself is refused (> Lo, not ≥ Lo).
	LoOpen bool
	// Step is the finest difference the field tells apart (0.01 for a
	// percentage with two decimals): one step past a bound is outside.
	// Zero means 1 for a whole number, 1ms for a duration and the next
	// float for a decimal number.
	Step float64
}

// WholeBounds are the bounds of a whole number from lo to hi.
func WholeBounds(lo, hi int64) *Bounds {
	return &Bounds{Unit: WholeUnit, Lo: float64(lo), Hi: float64(hi)}
}

// NumberBounds are the bounds of a decimal number from lo to hi.
func NumberBounds(lo, hi float64) *Bounds { return &Bounds{Unit: NumberUnit, Lo: lo, Hi: hi} }

// DurationBounds are the bounds of a duration from lo to hi.
func DurationBounds(lo, hi time.Duration) *Bounds {
	return &Bounds{Unit: DurationUnit, Lo: float64(lo), Hi: float64(hi)}
}

// Open is b with Lo refused.
func (b *Bounds) Open() *Bounds { c := *b; c.LoOpen = true; return &c }

// By is b with a step of step.
func (b *Bounds) By(step float64) *Bounds { c := *b; c.Step = step; return &c }

// Extremes are the least and the greatest value the field takes, in its
// syntax.
func (b *Bounds) Extremes() []string {
	lo := b.Lo
	if b.LoOpen {
		lo = b.next(lo, 1)
	}
	return []string{b.format(lo), b.format(b.Hi)}
}

// Outside are values just out of range, in the field's syntax: one step
// below the least (Lo itself when LoOpen), one above the greatest, and
// NaN; a Number's also ±Inf.
func (b *Bounds) Outside() []string {
	lo := b.Lo
	if !b.LoOpen {
		lo = b.next(lo, -1)
	}
	out := []string{b.format(lo), b.format(b.next(b.Hi, 1)), "NaN"}
	if b.Unit == NumberUnit {
		out = append(out, "Inf", "-Inf")
	}
	return out
}

// next is one step from x toward dir (±1).
func (b *Bounds) next(x, dir float64) float64 {
	switch {
	case b.Step != 0:
		return x + dir*b.Step
	case b.Unit == WholeUnit:
		return x + dir
	case b.Unit == DurationUnit:
		return x + dir*float64(time.Millisecond)
	}
	return math.Nextafter(x, dir*math.Inf(1))
}

func (b *Bounds) format(x float64) string {
	switch b.Unit {
	case WholeUnit:
		return strconv.FormatInt(int64(x), 10)
	case DurationUnit:
		return time.Duration(x).String()
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
