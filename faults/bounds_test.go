package faults_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
	"github.com/sluicegw/sluice/rulestore"
)

// TestNumericFieldRanges: every numeric field of every kind accepts its
// documented extremes and rejects the next value out, NaN and Inf, with
// the field named (docs: the reference tables of ratelimit.md,
// circuitbreaker.md, grayroute.md). The cases come from the kinds' field
// tables: each numeric row declares its Bounds; a numeric row without
// them fails.
func TestNumericFieldRanges(t *testing.T) {
	rl, cb, gr := rulestore.RateLimit, rulestore.CircuitBreaker, rulestore.Gray
	// The least rule of each kind, and what a row's extremes need of the
	// other fields beyond the row's Needs (checks across fields: a burst
	// of 1e12 needs a qps that refills it within a year).
	base := map[rulestore.Kind]rulestore.Fields{rl: {"qps": "1"}, cb: {}, gr: {"target_version": "v2"}}
	bigBucket := rulestore.Fields{"qps": "1e9", "burst": "1000000000000"}
	extremesNeed := map[rulestore.Kind]map[string]rulestore.Fields{
		rl: {
			"burst":            {"qps": "1e9"},
			"window_size":      {"qps": "1000"},
			"requested_tokens": bigBucket,
			"cost":             bigBucket,
			"reserve":          bigBucket,
			"max_cost":         bigBucket,
			"lease_size":       bigBucket,
			"min_limit":        {"max_limit": "1000000"},
			"max_limit":        {"min_limit": "1"},
			"initial_limit":    {"min_limit": "1", "max_limit": "1000000"},
			"sample_window":    {"min_rtt_interval": "24h"},
		},
		cb: {"min_requests": {"window": "60s"}},
	}
	for _, kind := range []rulestore.Kind{rl, cb, gr} {
		if len(rulestore.KindFields(kind)) == 0 {
			t.Fatalf("%s has no field table registered", kind)
		}
		for _, row := range rulestore.KindFields(kind) {
			if row.Bounds == nil {
				if numeric(row.Syntax) {
					t.Errorf("%s %s: numeric (%s), but its row declares no Bounds", kind, row.Name, row.Syntax)
				}
				continue
			}
			rule := fieldtable.RuleFor(base[kind], row)
			maps.Copy(rule, extremesNeed[kind][row.Name])
			tryRange(t, kind, row.Name, rule, row.Bounds.Extremes(), row.Bounds.Outside())
		}
	}

	// Other spellings, overflows and cross-field extremes beyond the rows'
	// Bounds.
	analysisOn := []string{"target_version", "v2", "fallback_version", "v1", "analysis", "on", "step_weight", "0.01"}
	cases := []struct {
		kind  rulestore.Kind
		field string
		ok    []string
		bad   []string
		other []string // the rest of the rule
	}{
		{rl, "qps", []string{"0.000001", "1e9"}, []string{"1e308", "1000000001", "0.0000009", "0", "NaN", "Inf", "-Inf"}, nil},
		{rl, "burst", []string{"0", "1000000000000"}, []string{"1000000000001", "9223372036854775807", "-1", "NaN"}, []string{"qps", "1e9"}},
		{rl, "requested_tokens", []string{"1", "1000000000000"}, []string{"1000000000001", "0"}, []string{"qps", "1e9", "burst", "1000000000000"}},
		{rl, "window_size", []string{"0.001", "31622400", "8784h"}, []string{"31622401", "8785h", "1e-10", "NaN", "Inf"}, []string{"qps", "1000", "limit_type", "sliding_window"}},
		{rl, "max_concurrent", []string{"0", "1000000000"}, []string{"1000000001", "-1"}, []string{"qps", "1"}},
		{rl, "max_concurrent_total", []string{"0", "1000000000000"}, []string{"1000000000001"}, []string{"qps", "1"}},
		{rl, "max_keys", []string{"1", "1000000000"}, []string{"1000000001", "0"}, []string{"qps", "1"}},
		{rl, "overrides", []string{"user:a=1e9/1000000000000"}, []string{"user:a=1e308", "user:a=NaN", "user:a=1/1000000000001"}, []string{"qps", "1"}},
		{cb, "failure_rate", []string{"0.01", "100"}, []string{"100.1", "NaN", "Inf", "0"}, nil},
		{cb, "open_duration", []string{"1ms", "8784h", "527040m"}, []string{"8785h", "527041m", "31622400000", "9223372036854775807"}, nil},
		{cb, "max_open_duration", []string{"0", "8784h"}, []string{"8785h", "9223372036854775807"}, nil},
		{cb, "failure_threshold", []string{"0", "1000000"}, []string{"1000001"}, nil},
		{cb, "window", []string{"1000000", "8784h"}, []string{"1000001", "8785h"}, []string{"failure_rate", "50"}},
		{gr, "weight", []string{"0", "100", "12.5"}, []string{"100.01", "NaN", "Inf"}, []string{"target_version", "v2"}},
		{gr, "ramp", []string{"2026-12-01T10:00:00Z 8784h"}, []string{"2026-12-01T10:00:00Z 8785h", "2026-12-01T10:00:00Z 1h NaN"}, []string{"target_version", "v2"}},
		// Rate limit: status, cluster, pacing, warm-up and adaptive fields.
		{rl, "status", []string{"400", "599"}, []string{"399", "600", "1e3"}, []string{"qps", "1"}},
		{rl, "redis_timeout", []string{"1ms", "10s"}, []string{"999us", "10001ms", "NaN"}, []string{"qps", "1", "scope", "cluster"}},
		{rl, "lease_size", []string{"0", "1000000000000"}, []string{"1000000000001", "-1"}, []string{"qps", "1e9", "burst", "1000000000000", "scope", "cluster"}},
		{rl, "max_queue_wait", []string{"0s", "1m"}, []string{"1m1s", "-1ms", "NaN"}, []string{"qps", "1", "control_behavior", "pace"}},
		{rl, "max_queued", []string{"1", "1000000"}, []string{"0", "1000001"}, []string{"qps", "1", "control_behavior", "pace"}},
		{rl, "warm_up_period", []string{"1ms", "24h"}, []string{"0s", "24h1s"}, []string{"qps", "1", "control_behavior", "warm_up"}},
		{rl, "cold_factor", []string{"1.001", "1000"}, []string{"1", "1000.1", "NaN", "Inf"}, []string{"qps", "1", "control_behavior", "warm_up", "warm_up_period", "30s"}},
		{rl, "min_limit", []string{"1", "1000000"}, []string{"0", "1000001"}, []string{"qps", "1", "max_concurrent", "adaptive", "max_limit", "1000000"}},
		{rl, "max_limit", []string{"3", "1000000"}, []string{"0", "1000001"}, []string{"qps", "1", "max_concurrent", "adaptive"}},
		{rl, "initial_limit", []string{"3", "1000"}, []string{"0", "1000001"}, []string{"qps", "1", "max_concurrent", "adaptive"}},
		{rl, "latency_tolerance", []string{"0", "10"}, []string{"-0.1", "10.1", "NaN", "Inf"}, []string{"qps", "1", "max_concurrent", "adaptive"}},
		{rl, "sample_window", []string{"10ms", "1m"}, []string{"9ms", "1m1s"}, []string{"qps", "1", "max_concurrent", "adaptive", "min_rtt_interval", "24h"}},
		{rl, "min_rtt_interval", []string{"1s", "24h"}, []string{"999ms", "24h1s"}, []string{"qps", "1", "max_concurrent", "adaptive", "sample_window", "10ms"}},
		// Circuit breaker: the other counts, rates and durations.
		{cb, "success_threshold", []string{"1", "1000000"}, []string{"0", "1000001"}, nil},
		{cb, "half_open_requests", []string{"1", "1000000"}, []string{"0", "1000001"}, nil},
		{cb, "min_requests", []string{"1", "1000000"}, []string{"0", "1000001"}, []string{"failure_rate", "50", "window", "60s"}},
		{cb, "slow_call_rate", []string{"0.01", "100"}, []string{"0", "100.1", "NaN"}, []string{"slow_call_duration", "1s"}},
		{cb, "slow_call_duration", []string{"1ms", "8784h"}, []string{"0s", "8785h"}, []string{"slow_call_rate", "50"}},
		{cb, "ramp_duration", []string{"0s", "8784h"}, []string{"8785h", "-1s"}, nil},
		{cb, "status", []string{"400", "599"}, []string{"399", "600", "200"}, nil}, // one status range for both refusals (issue 15)
		// Gray: the canary analysis fields.
		{gr, "analysis_interval", []string{"100ms", "1h"}, []string{"99ms", "1h1s"}, analysisOn},
		{gr, "min_samples", []string{"1", "1000000000"}, []string{"0", "1000000001", "18446744073709551615"}, analysisOn},
		{gr, "max_latency_ratio", []string{"1", "100"}, []string{"0.99", "100.1", "NaN", "Inf"}, analysisOn},
		{gr, "min_latency_delta", []string{"0s", "1m"}, []string{"-1ms", "1m1ms"}, analysisOn},
		{gr, "latency_percentile", []string{"50", "99.9"}, []string{"49.9", "99.91", "NaN"}, analysisOn},
		{gr, "step_weight", []string{"0.01", "100"}, []string{"0", "100.01", "NaN"}, []string{"target_version", "v2", "fallback_version", "v1", "analysis", "on"}},
		{gr, "max_weight", []string{"0.01", "100"}, []string{"0", "100.01", "NaN"}, analysisOn},
		{gr, "failure_threshold", []string{"1", "1000"}, []string{"0", "1001"}, analysisOn},
		{gr, "max_step_duration", []string{"0s", "10s", "24h"}, []string{"9s", "-1s", "24h1s", "NaN"}, analysisOn},
	}
	for _, c := range cases {
		rule := rulestore.Fields{}
		for i := 0; i+1 < len(c.other); i += 2 {
			rule[c.other[i]] = c.other[i+1]
		}
		if c.kind == rl && rule["qps"] == "" && c.field != "qps" {
			rule["qps"] = "1"
		}
		tryRange(t, c.kind, c.field, rule, c.ok, c.bad)
	}
	// Computed values at the extremes stay in range.
	r, err := ratelimit.ParseRule("r", rulestore.Fields{"qps": "1e9"})
	if err != nil || r.Limits.Burst != 1e9 {
		t.Errorf("qps 1e9: burst %v, %v; want the default burst 1e9", r.Limits.Burst, err)
	}
	if _, err := ratelimit.ParseRule("r", rulestore.Fields{"qps": "0.000001", "burst": "1000000000000"}); err == nil ||
		!strings.Contains(err.Error(), "field burst") {
		t.Errorf("a bucket that takes 31,700 years to refill was accepted (err %v)", err)
	}
}

// tryRange parses rule with field set to each value of ok, which must
// pass, and of bad, which must fail naming the field.
func tryRange(t *testing.T, kind rulestore.Kind, field string, rule rulestore.Fields, ok, bad []string) {
	t.Helper()
	with := func(v string) rulestore.Fields {
		f := maps.Clone(rule)
		f[field] = v
		return f
	}
	for _, v := range ok {
		if _, err := rulestore.Parse(kind, "r", with(v)); err != nil {
			t.Errorf("%s %s=%q rejected: %v", kind, field, v, err)
		}
	}
	for _, v := range bad {
		_, err := rulestore.Parse(kind, "r", with(v))
		if err == nil {
			t.Errorf("%s %s=%q accepted", kind, field, v)
			continue
		}
		if !strings.Contains(err.Error(), "field "+field) {
			t.Errorf("%s %s=%q: error does not name the field: %v", kind, field, v, err)
		}
	}
}

// numeric reports whether a row's Syntax column shows a number, a
// duration or a status.
func numeric(syntax string) bool {
	for _, p := range []string{"int", "number", "percent", "duration", "seconds", "400–599", "`<duration>`"} {
		if strings.HasPrefix(syntax, p) {
			return true
		}
	}
	return false
}

// TestHugeQPSRejectedOnEveryPath: qps 1e308 (which once made a rule that
// never limits, or a default burst that overflowed to a negative
// X-RateLimit-Limit) is refused by the Caddyfile, by JSON config, from
// Redis (the last good rule stays) and by the admin API; qps 1e9, the
// largest allowed, gives the exact header.
func TestHugeQPSRejectedOnEveryPath(t *testing.T) {
	// Caddyfile: caddy validate fails, naming the field.
	err := testcaddy.Validate(`{
	rulestore {
		rate_limit huge {
			qps 1e308
		}
	}
}
:0 {
	ratelimit huge
	respond "ok"
}
`)
	if err == nil || !strings.Contains(err.Error(), "qps") {
		t.Errorf("Caddyfile with qps 1e308: validate error %v, want one naming qps", err)
	}
	// JSON config.
	var cfg caddy.Config
	if err := json.Unmarshal([]byte(`{"apps": {"rulestore": {"rate_limit": {"huge": {"qps": 1e308}}}}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err == nil || !strings.Contains(err.Error(), "field qps") {
		t.Errorf("JSON with qps 1e308: validate error %v, want one naming qps", err)
	}

	// Redis and the admin API, on running Caddy: per_user is a static rule
	// of the rig, replaced from Redis.
	rg := startRig(t)
	push(t, rg.c, "rate_limit", "per_user", "qps", "1e9", "burst", "1000000000", "key_resolver", "userId")
	waitRule(t, rg.admin, "rate_limit", "per_user", map[string]string{"qps": "1e9"})
	limit := func() string {
		resp, _ := testcaddy.Get(t, rg.site+"/user", "X-User-Id: bounds")
		return resp.Header.Get("X-RateLimit-Limit")
	}
	if got := limit(); got != "1000000000" {
		t.Errorf("qps 1e9: X-RateLimit-Limit %q, want 1000000000", got)
	}
	push(t, rg.c, "rate_limit", "per_user", "qps", "1e308", "burst", "1000000000", "key_resolver", "userId")
	testcaddy.Eventually(t, 15*time.Second, "the rejection logged", func() bool {
		return strings.Contains(rg.logs(), `"key":"rate_limit:rule:per_user","field":"qps"`)
	})
	if v, _ := adminRule(t, rg.admin, "rate_limit", "per_user"); v.Fields["qps"] != "1e9" {
		t.Errorf("after qps 1e308 from Redis, rule = %v, want the last good one (1e9)", v.Fields)
	}
	if got := limit(); got != "1000000000" {
		t.Errorf("after qps 1e308 from Redis: X-RateLimit-Limit %q, want 1000000000", got)
	}
	req, _ := http.NewRequest("PUT", fmt.Sprintf("http://localhost:%d/sluice/rules/rate_limit/per_user", rg.admin),
		strings.NewReader(`{"qps": "1e308", "key_resolver": "userId"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "qps") {
		t.Errorf("admin PUT qps 1e308: %d %s, want 400 naming qps", resp.StatusCode, body)
	}
}
