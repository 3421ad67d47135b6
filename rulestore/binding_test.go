package rulestore

import (
	"slices"
	"strings"
	"testing"
)

// A binding's rate_limit is one rule id or a comma list of them (several
// limits on one route); RateLimit keeps the first.
func TestBindingRateLimitList(t *testing.T) {
	for _, c := range []struct {
		in    string
		want  []string
		first string
	}{
		{"", nil, ""},
		{"per_second", []string{"per_second"}, "per_second"},
		{"per_second,per_day", []string{"per_second", "per_day"}, "per_second"},
		{" per_second , per_day ", []string{"per_second", "per_day"}, "per_second"},
	} {
		v, err := Parse(Binding, "r", Fields{"rate_limit": c.in})
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		b := v.(*RouteBinding)
		if !slices.Equal(b.RateLimits, c.want) || b.RateLimit != c.first {
			t.Errorf("%q: RateLimits %q RateLimit %q, want %q %q", c.in, b.RateLimits, b.RateLimit, c.want, c.first)
		}
		if refs := b.Refs(); len(refs) != len(c.want) {
			t.Errorf("%q: refs %v, want one per rule", c.in, refs)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"a,a", `rule "a" listed twice`},
		{"a,b c", "rate_limit"},
	} {
		if _, err := Parse(Binding, "r", Fields{"rate_limit": c.in}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one with %q", c.in, err, c.want)
		}
	}
}
