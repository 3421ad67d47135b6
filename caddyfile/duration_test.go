package caddyfile_test

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// Finding 8 of issue 13: `open_duration 10` silently opened the breaker for
// 10 ms. Every duration needs a unit; window_size (bare seconds, defined
// by the Redis contract) and window (a call count) keep their bare forms.
func TestBareNumberDurationIsAnError(t *testing.T) {
	redis := "\t\tredis redis://127.0.0.1:1\n"
	for _, c := range []struct{ name, global, want string }{
		{"open_duration", "\t\tcircuit_breaker cb {\n\t\t\topen_duration 10\n\t\t}", `field open_duration="10": needs a unit, e.g. 10s or 10ms, at Caddyfile:4`},
		{"max_open_duration", "\t\tcircuit_breaker cb {\n\t\t\tmax_open_duration 600\n\t\t}", `field max_open_duration="600": needs a unit, e.g. 600s`},
		{"slow_call_duration", "\t\tcircuit_breaker cb {\n\t\t\tslow_call_rate 50\n\t\t\tslow_call_duration 2\n\t\t}", `field slow_call_duration="2": needs a unit`},
		{"ramp_duration", "\t\tcircuit_breaker cb {\n\t\t\tramp_duration 30\n\t\t}", `field ramp_duration="30": needs a unit`},
		{"redis_timeout", redis + "\t\trate_limit r {\n\t\t\tqps 5\n\t\t\tscope cluster\n\t\t\tredis_timeout 50\n\t\t}", `field redis_timeout="50": needs a unit, e.g. 50s or 50ms, at Caddyfile:7`},
		{"gray ramp", "\t\tgray g {\n\t\t\ttarget_version v2\n\t\t\tramp \"2026-12-01T10:00:00Z 600\"\n\t\t}", `needs a unit, e.g. 600s`},
		{"resync", "\t\tresync 30", `resync 30: needs a unit, e.g. 30s or 30ms, at Caddyfile:3`},
		{"redis read_timeout", "\t\tredis {\n\t\t\turl redis://127.0.0.1:1\n\t\t\tread_timeout 1\n\t\t}", `redis read_timeout 1: needs a unit, e.g. 1s or 1ms, at Caddyfile:5`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := testcaddy.Validate("{\n\trulestore {\n" + c.global + "\n\t}\n}\n")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
	for _, ok := range []string{
		"\t\tcircuit_breaker cb {\n\t\t\topen_duration 10s\n\t\t\tfailure_rate 50\n\t\t\twindow 100\n\t\t}",
		"\t\tcircuit_breaker cb {\n\t\t\tfailure_rate 50\n\t\t\twindow 60s\n\t\t\tmax_open_duration 0\n\t\t}",
		"\t\trate_limit r {\n\t\t\tlimit_type sliding_window\n\t\t\tqps 1\n\t\t\twindow_size 10\n\t\t}",
	} {
		if err := testcaddy.Validate("{\n\trulestore {\n" + ok + "\n\t}\n}\n"); err != nil {
			t.Errorf("rejected %q: %v", ok, err)
		}
	}
}

// The same rule arriving from Redis (HSET open_duration 10) is rejected
// with the field named, so the last good rule stays in force.
func TestBareNumberDurationFromRedisIsRejected(t *testing.T) {
	_, err := rulestore.Parse(rulestore.CircuitBreaker, "cb", rulestore.Fields{"open_duration": "10"})
	if err == nil || !strings.Contains(err.Error(), `field open_duration="10": needs a unit, e.g. 10s`) {
		t.Fatalf("got %v", err)
	}
}
