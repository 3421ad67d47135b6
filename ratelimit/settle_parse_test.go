package ratelimit

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

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
