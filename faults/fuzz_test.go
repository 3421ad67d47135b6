package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/circuitbreaker"
	"github.com/sluicegw/sluice/grayroute"
	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// The fuzz targets below run their seeds on every `go test`; `make soak`
// fuzzes each for a while (go test -fuzz). Seeds live here, in the f.Add
// calls; failing inputs found by a fuzz run land in testdata/fuzz/.

// FuzzRuleFields feeds arbitrary fields to every kind's rule parser (the
// code that judges what comes from Redis): it must never panic, and every
// rejection must be a FieldError naming a real field: one the writer sent,
// or one the kind knows (as its own "unknown field" message lists them).
func FuzzRuleFields(f *testing.F) {
	seeds := [][4]string{
		{"qps", "10", "burst", "20"},
		{"qps", "1e400", "limit_type", "sliding_window"},
		{"qps", "NaN", "window_size", "-1"},
		{"key_resolver", "{http.request.header.X", "qps", "1"},
		{"overrides", "user:a=1/1,user:b=", "qps", "5"},
		{"failure_threshold", "-1", "window", "1h"},
		{"window", "100", "failure_rate", "101%"},
		{"failure_statuses", "599-500", "slow_call_duration", "0"},
		{"headers", "X: a; ;;:", "state", "force_open"},
		{"match_tag", "X-Canary", "match_value", "regex:("},
		{"target_version", "v2", "ramp", "2026-12-01T10:00:00Z 10m 100,50"},
		{"weight", "12.345", "hash_key", "{http.request.cookie.}"},
		{"rate_limit", "a", "gray", ",,,"},
		{"gray", "a,a,a", "circuit_breaker", "bad id!"},
		{"scope", "cluster", "on_redis_error", "maybe"},
		{"\x00", "\xff\xfe", "qps", strings.Repeat("9", 400)},
		// Numeric ranges (issue 20): extremes, one past them, NaN and Inf.
		{"qps", "1e308", "burst", "1"},
		{"qps", "1e9", "burst", "1000000000000"},
		{"qps", "0.000001", "burst", "1000000000000"},
		{"qps", "1", "requested_tokens", "9223372036854775807"},
		{"qps", "1e9", "limit_type", "sliding_window"},
		{"window_size", "8784h", "qps", "1e9"},
		{"overrides", "user:a=1e9/1000000000000", "qps", "1e-6"},
		{"open_duration", "9223372036854775807", "max_open_duration", "8784h"},
		{"failure_rate", "NaN", "slow_call_rate", "Inf"},
		{"weight", "NaN", "ramp", "2026-12-01T10:00:00Z 9999999h"},
		{"cold_factor", "1e308", "control_behavior", "warm_up"},
		{"max_queue_wait", "9223372036854775807ns", "control_behavior", "pace"},
		{"latency_tolerance", "NaN", "max_concurrent", "adaptive"},
		{"min_samples", "18446744073709551615", "analysis", "on"},
		{"max_latency_ratio", "Inf", "latency_percentile", "NaN"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3])
	}
	kinds := []rulestore.Kind{rulestore.RateLimit, rulestore.CircuitBreaker, rulestore.Gray, rulestore.Binding}
	known := map[rulestore.Kind]map[string]bool{}
	for _, k := range kinds {
		known[k] = knownFields(f, k)
	}
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		fields := rulestore.Fields{n1: v1, n2: v2}
		for _, k := range kinds {
			v, err := rulestore.Parse(k, "fuzz", fields)
			if err == nil {
				checkBounded(t, fields, v)
				continue
			}
			var fe *rulestore.FieldError
			switch {
			case !errors.As(err, &fe):
				t.Errorf("%s rule %q: rejected without a FieldError: %v", k, fields, err)
			case fe.Field == "" && !hasField(fields, ""):
				t.Errorf("%s rule %q: FieldError without a field: %v", k, fields, err)
			case fe.Field == "" && !strings.Contains(err.Error(), `field ""`):
				// A Redis hash or JSON object may hold a field with an
				// empty name: the error must say so, not print nothing.
				t.Errorf("%s rule %q: the error on the empty field name does not show it: %v", k, fields, err)
			case !known[k][fe.Field] && !hasField(fields, fe.Field):
				t.Errorf("%s rule %q: FieldError names %q, neither sent nor a field of %s rules: %v", k, fields, fe.Field, k, err)
			}
		}
	})
}

// knownFields asks a kind's parser for its field names: the "unknown field"
// rejection of a made-up field lists them as "(want a, b, c)" or
// "(want one of a, b, c)".
func knownFields(f *testing.F, k rulestore.Kind) map[string]bool {
	_, err := rulestore.Parse(k, "probe", rulestore.Fields{"no_such_field_probe": "1"})
	msg := fmt.Sprint(err)
	_, list, ok := strings.Cut(msg, "(want ")
	list, _, ok2 := strings.Cut(list, ")")
	if err == nil || !ok || !ok2 {
		f.Fatalf("%s: the rejection of an unknown field does not list the known ones: %v", k, err)
	}
	names := map[string]bool{}
	for _, n := range strings.Split(strings.TrimPrefix(list, "one of "), ",") {
		names[strings.TrimSpace(n)] = true
	}
	if len(names) < 2 {
		f.Fatalf("%s: known fields %v from %q", k, names, msg)
	}
	return names
}

func hasField(f rulestore.Fields, name string) bool {
	_, ok := f[name]
	return ok
}

// checkBounded asserts that an accepted rule's numbers, given and
// computed, are finite and inside the documented ranges.
func checkBounded(t *testing.T, fields rulestore.Fields, v any) {
	t.Helper()
	switch r := v.(type) {
	case *ratelimit.Rule:
		limits := []*ratelimit.Limits{&r.Limits}
		for _, l := range r.Overrides {
			limits = append(limits, l)
		}
		for _, l := range limits {
			if !(l.QPS >= ratelimit.MinQPS && l.QPS <= ratelimit.MaxQPS) || !(l.Burst >= 0 && l.Burst <= ratelimit.MaxBurst) ||
				l.Window < 0 || l.Window > int64(syntax.MaxRuleDuration) || !(l.Max >= 0 && l.Max < 1<<62) {
				t.Errorf("rate_limit rule %q accepted with limits out of range: %+v", fields, *l)
			}
			if l.Burst > 0 && l.Burst/l.QPS > syntax.MaxRuleDuration.Seconds() {
				t.Errorf("rate_limit rule %q: refill time %gs over a year", fields, l.Burst/l.QPS)
			}
		}
	case *circuitbreaker.Rule:
		s := r.Settings
		for _, d := range []time.Duration{s.OpenDuration, s.MaxOpenDuration, s.RampDuration, s.WindowDuration, r.SlowCallDuration} {
			if d < 0 || d > syntax.MaxRuleDuration {
				t.Errorf("circuit_breaker rule %q accepted with a duration out of range: %v", fields, d)
			}
		}
		if !(s.FailureRate >= 0 && s.FailureRate <= 100) || !(s.SlowCallRate >= 0 && s.SlowCallRate <= 100) {
			t.Errorf("circuit_breaker rule %q accepted with a rate out of range: %v %v", fields, s.FailureRate, s.SlowCallRate)
		}
	case *grayroute.Rule:
		if r.Weight > grayroute.Buckets {
			t.Errorf("gray rule %q accepted with weight %d basis points", fields, r.Weight)
		}
		if a := r.Analysis; a != nil && (a.MinSamples < 1 || a.MinSamples > grayroute.MaxMinSamples ||
			!(a.MaxLatencyRatio >= 1 && a.MaxLatencyRatio <= 100) || !(a.LatencyPercentile >= 50 && a.LatencyPercentile <= 99.9) ||
			a.StepWeight > grayroute.Buckets || a.MaxWeight > grayroute.Buckets || a.FailureThreshold < 1 || a.FailureThreshold > 1000) {
			t.Errorf("gray rule %q accepted with analysis settings out of range: %+v", fields, a.AnalysisConfig)
		}
	}
	if r, ok := v.(*ratelimit.Rule); ok {
		fl := r.Flow
		if fl.MaxQueueWait < 0 || fl.MaxQueueWait > int64(time.Minute) || fl.MaxQueued < 0 || fl.MaxQueued > 1_000_000 ||
			fl.WarmUpPeriod < 0 || fl.WarmUpPeriod > int64(24*time.Hour) || fl.ColdFactor != 0 && !(fl.ColdFactor > 1 && fl.ColdFactor <= 1000) {
			t.Errorf("rate_limit rule %q accepted with flow settings out of range: %+v", fields, fl)
		}
		if a := fl.Adaptive; a != nil && (a.MinLimit < 1 || a.MaxLimit > 1_000_000 || a.InitialLimit < a.MinLimit || a.InitialLimit > a.MaxLimit ||
			!(a.Tolerance >= 0 && a.Tolerance <= 10) || a.SampleWindow < int64(10*time.Millisecond) || a.MinRTTInterval > int64(24*time.Hour)) {
			t.Errorf("rate_limit rule %q accepted with adaptive settings out of range: %+v", fields, *a)
		}
	}
}

// FuzzKey builds request keys from arbitrary specs and header values: no
// panic, a key never longer than handlerkit.MaxKeyLength, and the same
// request always gives the same key.
func FuzzKey(f *testing.F) {
	f.Add("userId", "alice", "10.0.0.1")
	f.Add("{http.request.header.X-Api-Key} ip", "", "")
	f.Add("tenant global", strings.Repeat("t", 300), "1.2.3.4, 5.6.7.8")
	f.Add("{http.request.header.X-Tenant-Id}:{http.request.uri.path}", "{http.request.header.X-User-Id}", "")
	f.Add("{http.request.uri.query.k}{http.request.cookie.c}", "\xff\x00", "::1")
	f.Add("{", "}", "{}")
	f.Fuzz(func(t *testing.T, spec, value, xff string) {
		key, err := handlerkit.ParseKey(spec)
		if err != nil {
			return
		}
		req, err := http.NewRequest(http.MethodGet, "http://example.com/p?k="+strings.ReplaceAll(value, "&", ""), nil)
		if err != nil {
			req, _ = http.NewRequest(http.MethodGet, "http://example.com/p", nil)
		}
		for _, h := range []string{"X-User-Id", "X-Api-Key", "X-Tenant-Id"} {
			req.Header[h] = []string{value}
		}
		req.Header["X-Forwarded-For"] = []string{xff}
		req.AddCookie(&http.Cookie{Name: "c", Value: "v"})
		repl := caddyhttp.NewTestReplacer(req)
		req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, repl))
		a, okA := key.Append(nil, req)
		b, okB := key.Append(nil, req)
		if okA != okB || string(a) != string(b) {
			t.Fatalf("spec %q: key not deterministic: %q/%v then %q/%v", spec, a, okA, b, okB)
		}
		if len(a) > handlerkit.MaxKeyLength {
			t.Fatalf("spec %q value %q: key of %d bytes, cap %d", spec, value, len(a), handlerkit.MaxKeyLength)
		}
	})
}

// FuzzCaddyfile adapts and provisions (as `caddy validate` does) Caddyfiles
// whose directive blocks and global rulestore block hold arbitrary text:
// the parsers and Provision/Validate must return an error, never panic.
func FuzzCaddyfile(f *testing.F) {
	f.Add(uint8(0), "qps 10\nburst 20\nkey_resolver userId")
	f.Add(uint8(0), "rule a\nroute b\nqps")
	f.Add(uint8(1), "failure_threshold 5\nheader X-A \"b\"\nheader")
	f.Add(uint8(2), "gray a {\nmatch_tag X\n}\ndefault_version {\n")
	f.Add(uint8(3), "redis {\nurl redis://x\naddrs\n}\nrate_limit a { qps 1 }\nbinding r { gray a,,b }")
	f.Add(uint8(3), "rate_limit {\n}\n}\n{")
	f.Add(uint8(1), "\"unterminated")
	f.Add(uint8(0), "qps 10\nburst 20")
	f.Add(uint8(3), "rate_limit a {\nqps 1\n}\nbinding r {\nrate_limit a\n}")
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		var cf string
		switch which % 4 {
		case 0:
			cf = "http://127.0.0.1:1 {\n\tratelimit {\n" + body + "\n\t}\n\trespond ok\n}\n"
		case 1:
			cf = "http://127.0.0.1:1 {\n\tcircuitbreaker {\n" + body + "\n\t}\n\trespond ok\n}\n"
		case 2:
			cf = "http://127.0.0.1:1 {\n\tgrayroute {\n" + body + "\n\t}\n\trespond ok\n}\n"
		case 3:
			cf = "{\n\trulestore {\n" + body + "\n\t}\n}\nhttp://127.0.0.1:1 {\n\trespond ok\n}\n"
		}
		testcaddy.Validate(cf) // an error is fine; a panic fails the fuzz run
	})
}
