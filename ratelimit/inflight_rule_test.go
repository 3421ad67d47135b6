package ratelimit

import (
	"errors"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// TestParseRuleInFlightOnly: max_concurrent (a number or adaptive) or
// max_concurrent_total alone makes a rule without qps, from any source
// (Caddyfile, JSON and Redis all reach ParseRule as fields); anything that
// shapes a rate is refused on it, naming the field.
func TestParseRuleInFlightOnly(t *testing.T) {
	for _, c := range []struct {
		fields rulestore.Fields
		field  string // the field blamed, "" for a valid rule
	}{
		{rulestore.Fields{"max_concurrent": "adaptive", "key_resolver": "global"}, ""},
		{rulestore.Fields{"max_concurrent": "5"}, ""},
		{rulestore.Fields{"max_concurrent_total": "3", "concurrency_status": "503", "headers": "false"}, ""},
		{rulestore.Fields{}, "qps"},
		{rulestore.Fields{"max_concurrent": "0"}, "qps"},
		{rulestore.Fields{"max_concurrent": "2", "limit_type": "sliding_window"}, "qps"},
		{rulestore.Fields{"max_concurrent": "2", "burst": "5"}, "burst"},
		{rulestore.Fields{"max_concurrent": "2", "control_behavior": "pace"}, "control_behavior"},
		{rulestore.Fields{"max_concurrent": "2", "scope": "cluster"}, "scope"},
		{rulestore.Fields{"max_concurrent": "2", "headers": "true"}, "headers"},
		{rulestore.Fields{"max_concurrent": "x"}, "max_concurrent"},
	} {
		r, err := ParseRule(InlineID(c.fields), c.fields)
		if c.field == "" {
			if err != nil {
				t.Errorf("%v: %v, want a rule", c.fields, err)
			} else if !r.InFlightOnly || r.Headers {
				t.Errorf("%v: inFlightOnly %v headers %v, want a rule without rate or headers", c.fields, r.InFlightOnly, r.Headers)
			}
			continue
		}
		var fe *rulestore.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%v: error %v, want one naming %s", c.fields, err, c.field)
		}
	}
	// A rule with qps is not one.
	if r, err := ParseRule("q", rulestore.Fields{"qps": "5", "max_concurrent": "2"}); err != nil || r.InFlightOnly {
		t.Errorf("qps with max_concurrent: inFlightOnly %v, err %v", r != nil && r.InFlightOnly, err)
	}
}
