package settlement

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// ResponseCost reads a response's cost from header h's values of name
// (response_cost's header) and trailer (the trailer of that name), up to
// max: the larger of the two where both hold a whole number ≥ 0 (a header
// may carry an early estimate, the trailer the final count), a number too
// large for int64 as max; neither a whole number, unreported stands. The
// names are canonical already: read from the map directly (http.Header.Get
// would canonicalise them again, and build the trailer's key, per
// request).
func ResponseCost(h http.Header, name, trailer string, unreported, max int64) int64 {
	n, ok := reportedCost(h[name])
	if t, tok := reportedCost(h[trailer]); tok && (!ok || t > n) {
		n, ok = t, true
	}
	if !ok {
		return unreported
	}
	return min(n, max)
}

// reportedCost reads the first of a header's values as a whole number.
func reportedCost(vs []string) (int64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	return ParseWhole(vs[0])
}

// ParseWhole reads a whole number ≥ 0: plain digits (up to 18, the
// usual report) without strconv, else whatever strconv.ParseInt takes
// after trimming spaces; a number beyond int64 reads as math.MaxInt64.
func ParseWhole(v string) (int64, bool) {
	if len(v) > 0 && len(v) <= 18 {
		var n int64
		for i := 0; i < len(v); i++ {
			c := v[i] - '0'
			if c > 9 {
				return parseWholeSlow(v)
			}
			n = n*10 + int64(c)
		}
		return n, true
	}
	return parseWholeSlow(v)
}

func parseWholeSlow(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if errors.Is(err, strconv.ErrRange) && n > 0 {
		return math.MaxInt64, true
	}
	return n, err == nil && n >= 0
}
