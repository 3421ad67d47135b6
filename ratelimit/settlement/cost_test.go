package settlement

import (
	"math"
	"strings"
	"testing"
)

// ParseWhole takes what strconv.ParseInt takes after trimming spaces
// (whole numbers ≥ 0), on its fast path for plain digits too; a number
// beyond int64 reads as the largest int64 (it is clipped to max_cost).
func TestParseWhole(t *testing.T) {
	for _, c := range []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true}, {"3", 3, true}, {"000042", 42, true}, {" 7 ", 7, true}, {"+5", 5, true},
		{"999999999999999999", 999999999999999999, true}, {"9223372036854775807", 9223372036854775807, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"abc", 0, false}, {"3x", 0, false},
		{"9223372036854775808", math.MaxInt64, true}, {strings.Repeat("9", 31), math.MaxInt64, true},
		{"-9223372036854775809", 0, false},
	} {
		n, ok := ParseWhole(c.in)
		if ok != c.ok || (ok && n != c.n) {
			t.Errorf("ParseWhole(%q) = %d, %v; want %d, %v", c.in, n, ok, c.n, c.ok)
		}
	}
}
