package rulestore

import (
	"encoding/json"
	"strings"
	"testing"
)

// A rule's Redis fields survive the trip through its typed form: the
// numbers, booleans, durations, lists and headers come back meaning the
// same (in their canonical spelling).
func TestSpecFieldsRoundTrip(t *testing.T) {
	cases := []struct {
		kind     Kind
		in, want Fields
	}{
		{RateLimit, Fields{"qps": "0.5", "burst": "0", "headers": "off", "window_size": "10", "limit_type": "sliding_window", "max_concurrent": "adaptive"},
			Fields{"qps": "0.5", "burst": "0", "headers": "false", "window_size": "10s", "limit_type": "sliding_window", "max_concurrent": "adaptive"}},
		{CircuitBreaker, Fields{"open_duration": "90s", "failure_rate": "50%", "failure_statuses": "500-599 429", "headers": "Content-Type: text/plain; charset=utf-8; X-A: 1"},
			Fields{"open_duration": "1m30s", "failure_rate": "50", "failure_statuses": "500-599,429", "headers": "Content-Type: text/plain; charset=utf-8; X-A: 1"}},
		{Gray, Fields{"weight": "0", "target_version": "v2", "analysis": "on", "analysis_interval": "24h"},
			Fields{"weight": "0", "target_version": "v2", "analysis": "true", "analysis_interval": "24h"}},
		{Binding, Fields{"gray": "a, b", "rate_limit": "r"}, Fields{"gray": "a,b", "rate_limit": "r"}},
	}
	for _, c := range cases {
		s, err := SpecFromFields(c.kind, c.in)
		if err != nil {
			t.Fatalf("%s %v: %v", c.kind, c.in, err)
		}
		if got := SpecFields(s); !got.Equal(c.want) {
			t.Errorf("%s %v: back as %v, want %v", c.kind, c.in, got, c.want)
		}
		// And through JSON, as `caddy adapt` writes it and Caddy reads it.
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, _ := NewSpec(c.kind)
		if err := json.Unmarshal(b, s2); err != nil {
			t.Fatalf("%s: %s does not read back: %v", c.kind, b, err)
		}
		if got := SpecFields(s2); !got.Equal(c.want) {
			t.Errorf("%s: JSON %s reads back as %v, want %v", c.kind, b, got, c.want)
		}
	}
}

// adapt writes numbers as numbers and durations as strings with a unit.
func TestSpecJSONIsTyped(t *testing.T) {
	s, err := SpecFromFields(CircuitBreaker, Fields{"failure_threshold": "3", "open_duration": "10s", "handle_errors": "yes"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	if want := `{"failure_threshold":3,"open_duration":"10s","handle_errors":true}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}

// Errors in a JSON rule name the rule and the field; a JSON string in the
// Redis syntax is still read.
func TestRuleSetJSONErrors(t *testing.T) {
	cases := []struct{ json, want string }{
		{`{"api": {"qpz": 5}}`, `rate_limit rule "api": field qpz: unknown field`},
		{`{"api": {"qps": true}}`, `rate_limit rule "api": field qps="true": want a number`},
		{`{"api": {"qps": "lots"}}`, `rate_limit rule "api": field qps="lots": want a number`},
		{`{"api": {"redis_timeout": 50}}`, `field redis_timeout="50": needs a unit`},
		{`{"api": {"shadow": "maybe"}}`, `field shadow="maybe": want true or false`},
	}
	for _, c := range cases {
		var r RuleSet[*RateLimitSpec]
		err := json.Unmarshal([]byte(c.json), &r)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.json, err, c.want)
		}
	}
	var r RuleSet[*RateLimitSpec]
	if err := json.Unmarshal([]byte(`{"api": {"qps": "5", "burst": 10, "window_size": 2}}`), &r); err != nil {
		t.Fatal(err)
	}
	if f := r["api"]; !f.Equal(Fields{"qps": "5", "burst": "10", "window_size": "2s"}) {
		t.Errorf("read %v", f)
	}
}
