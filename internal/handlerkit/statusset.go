package handlerkit

import (
	"strconv"
	"strings"
)

type statusError string

func (e statusError) Error() string { return string(e) }

// StatusSet is a set of HTTP status codes (0-639), tested without allocating.
type StatusSet [10]uint64

// Has reports whether code is in the set.
func (s *StatusSet) Has(code int) bool {
	return code >= 0 && code < 640 && s[code/64]&(1<<(code%64)) != 0
}

// AddRange adds the codes from lo to hi inclusive.
func (s *StatusSet) AddRange(lo, hi int) {
	for c := lo; c <= hi; c++ {
		s[c/64] |= 1 << (c % 64)
	}
}

// Parse adds codes given as "500-599 429", "5xx" or "502,503".
func (s *StatusSet) Parse(v string) error {
	words := strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
	if len(words) == 0 {
		return statusError("want status codes and ranges, e.g. 500-599 429")
	}
	for _, w := range words {
		lo, hi, isRange := strings.Cut(w, "-")
		if len(w) == 3 && (w[1:] == "xx" || w[1:] == "XX") {
			lo, hi, isRange = w[:1]+"00", w[:1]+"99", true
		}
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 100 || b > 599 || a > b {
			return statusError("bad status or range " + strconv.Quote(w) + " (want codes 100-599, e.g. 500-599 429 or 5xx)")
		}
		s.AddRange(a, b)
	}
	return nil
}
