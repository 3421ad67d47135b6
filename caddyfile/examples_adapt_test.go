package caddyfile_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// `caddy adapt --config examples/Caddyfile` shows the rules typed: numbers
// as numbers, durations as strings with a unit, a binding's gray list as a
// list.
func TestExampleCaddyfileAdaptsTyped(t *testing.T) {
	src, err := os.ReadFile("../examples/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	out, err := testcaddy.Adapt(string(src))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			Rulestore struct {
				RateLimit      map[string]map[string]any `json:"rate_limit"`
				CircuitBreaker map[string]map[string]any `json:"circuit_breaker"`
				Binding        map[string]map[string]any `json:"binding"`
			} `json:"rulestore"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	rs := cfg.Apps.Rulestore
	checks := []struct {
		what      string
		got, want any
	}{
		{"rate_limit order_api qps", rs.RateLimit["order_api"]["qps"], 5.0},
		{"rate_limit order_api burst", rs.RateLimit["order_api"]["burst"], 10.0},
		{"circuit_breaker order_cb failure_threshold", rs.CircuitBreaker["order_cb"]["failure_threshold"], 3.0},
		{"circuit_breaker order_cb open_duration", rs.CircuitBreaker["order_cb"]["open_duration"], "10s"},
		{"binding order_route gray", rs.Binding["order_route"]["gray"], []any{"product_canary"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: adapted to %#v, want %#v", c.what, c.got, c.want)
		}
	}
}
