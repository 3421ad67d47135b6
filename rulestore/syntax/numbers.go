package syntax

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Every numeric rule field has a documented range, so no value can make a
// computed one (a refill time, a quota, a deadline) overflow or go NaN. The
// rule parsers read numbers only through these helpers.

// ParseNumber parses a finite decimal number from lo to hi inclusive; ok is
// false for anything else (not a number, NaN, ±Inf, out of range).
func ParseNumber(v string, lo, hi float64) (x float64, ok bool) {
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(x) || x < lo || x > hi {
		return 0, false
	}
	return x, true
}

// ParseWhole parses a whole number from lo to hi inclusive.
func ParseWhole(v string, lo, hi int64) (n int64, ok bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// MaxRuleDuration bounds every duration field of a rule (a year and a day):
// longer is a typo, and deadlines computed from it stay far from overflow.
const MaxRuleDuration = 366 * 24 * time.Hour

// Range says "from lo to hi" for an error message, in plain digits.
func Range[T int64 | float64](lo, hi T) string {
	return "from " + formatNumber(float64(lo)) + " to " + formatNumber(float64(hi))
}

func formatNumber(x float64) string {
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// Span shows "lo–hi" as the docs' reference tables do: powers of ten from
// 1e9 up as 1e9, other whole numbers from 10,000 up with thousands
// separators. The field tables build their Syntax column from the bounds
// they check, so the two cannot disagree.
func Span[T int64 | float64](lo, hi T) string {
	return docNumber(float64(lo)) + "–" + docNumber(float64(hi))
}

func docNumber(x float64) string {
	if x >= 1e9 {
		if e := math.Log10(x); e == math.Trunc(e) {
			return "1e" + strconv.Itoa(int(e))
		}
	}
	s := formatNumber(x)
	if x < 10_000 || x != math.Trunc(x) {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// SpanDuration shows "lo–hi" for durations, without Go's trailing zero
// units (1m, not 1m0s).
func SpanDuration(lo, hi time.Duration) string {
	return DocDuration(lo) + "–" + DocDuration(hi)
}

// DocDuration shows d without Go's trailing zero units: 1m, 24h.
func DocDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
