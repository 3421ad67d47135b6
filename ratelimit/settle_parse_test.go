package ratelimit

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// parseWhole takes what strconv.ParseInt takes after trimming spaces
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
		n, ok := parseWhole(c.in)
		if ok != c.ok || (ok && n != c.n) {
			t.Errorf("parseWhole(%q) = %d, %v; want %d, %v", c.in, n, ok, c.n, c.ok)
		}
	}
}

// A response's cost: the larger of a header and a trailer that both hold
// a whole number, clipped to max_cost; a report beyond int64 is max_cost;
// junk in one of them leaves the other; no report, what stands unreported.
func TestResponseCostReports(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "1", "burst": "1000", "response_cost": "{http.response.header.X-Cost}",
		"reserve": "10", "max_cost": "1000"})
	for _, c := range []struct {
		header, trailer []string
		want            int64
	}{
		{[]string{"1"}, []string{"900"}, 900},
		{[]string{"900"}, []string{"1"}, 900},
		{[]string{""}, []string{"900"}, 900},
		{[]string{"junk"}, []string{"900"}, 900},
		{[]string{"40"}, []string{"junk"}, 40},
		{[]string{"9223372036854775808"}, nil, 1000},
		{[]string{"1" + strings.Repeat("0", 30)}, nil, 1000},
		{nil, []string{"5000"}, 1000},
		{[]string{"junk"}, nil, 77},
		{nil, nil, 77},
	} {
		h := http.Header{}
		if c.header != nil {
			h["X-Cost"] = c.header
		}
		if c.trailer != nil {
			h[http.TrailerPrefix+"X-Cost"] = c.trailer
		}
		if got := r.responseCost(h, 77); got != c.want {
			t.Errorf("header %q trailer %q: cost %d, want %d", c.header, c.trailer, got, c.want)
		}
	}
}
