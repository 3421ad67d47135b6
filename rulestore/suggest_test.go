package rulestore

import "testing"

func TestSuggest(t *testing.T) {
	known := []string{"rule", "route", "qps", "burst", "limit_type", "key_resolver", "max_concurrent"}
	for _, c := range []struct{ in, want string }{
		{"rout", "route"},
		{"rulee", "rule"},
		{"qsp", "qps"},     // swapped letters
		{"brust", "burst"}, // swapped letters
		{"limittype", "limit_type"},
		{"key_reslover", "key_resolver"},
		{"max_concurent", "max_concurrent"},
		{"colour", ""}, // nothing close
		{"x", ""},
	} {
		if got := Suggest(c.in, known...); got != c.want {
			t.Errorf("Suggest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := DidYouMean("rout", known...); got != ": did you mean route?" {
		t.Errorf("DidYouMean = %q", got)
	}
}
