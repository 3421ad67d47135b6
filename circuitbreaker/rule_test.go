package circuitbreaker

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

func TestRuleDefaults(t *testing.T) {
	r, err := ParseRule("x", rulestore.Fields{})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Settings
	if s.FailureThreshold != 10 || s.SuccessThreshold != 5 || s.OpenDuration != 30*time.Second ||
		s.HalfOpenRequests != 1 || s.MaxOpenDuration != 0 || s.hasWindow() || s.Mode != ModeAuto {
		t.Fatalf("defaults: %+v", s)
	}
	if r.Status != 503 || r.HandleErrors || r.Key != "" {
		t.Fatalf("response defaults: %+v", r)
	}
	for code, want := range map[int]bool{499: false, 500: true, 503: true, 599: true, 429: false, 200: false} {
		if r.Failures.Has(code) != want {
			t.Errorf("default failure_statuses: %d = %v", code, !want)
		}
	}
}

func TestRuleFields(t *testing.T) {
	r, err := ParseRule("x", rulestore.Fields{
		"failure_threshold": "0", "open_duration": "1500ms", "max_open_duration": "1m",
		"window": "30s", "failure_rate": "25%", "slow_call_duration": "2s", "slow_call_rate": "80",
		"failure_statuses": "5xx,429 400-403", "state": "force_closed", "status": "429",
		"headers": "Content-Type: text/plain; charset=utf-8; X-Fallback: 1", "header": "X-One 1 2",
		"handle_errors": "true", "key": "{http.vars.gray_version}", "ramp_duration": "10s",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Settings
	if s.FailureThreshold != 0 || s.OpenDuration != 1500*time.Millisecond || s.MaxOpenDuration != time.Minute ||
		s.WindowDuration != 30*time.Second || s.WindowCount != 0 || s.FailureRate != 25 || s.SlowCallRate != 80 ||
		s.MinRequests != 10 || s.Mode != ModeForceClosed || s.RampDuration != 10*time.Second {
		t.Fatalf("settings: %+v", s)
	}
	if r.SlowCallDuration != 2*time.Second || r.Status != 429 || !r.HandleErrors || r.Key != "{http.vars.gray_version}" {
		t.Fatalf("rule: %+v", r)
	}
	for _, c := range []int{500, 550, 599, 429, 400, 403} {
		if !r.Failures.Has(c) {
			t.Errorf("%d not a failure", c)
		}
	}
	if r.Failures.Has(404) || r.Failures.Has(600) {
		t.Error("404 or 600 counted")
	}
	want := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Fallback": {"1"}, "X-One": {"1 2"}}
	for k, v := range want {
		if got := r.Headers.Values(k); len(got) != 1 || got[0] != v[0] {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestRuleCountWindowMinRequests(t *testing.T) {
	r, err := ParseRule("x", rulestore.Fields{"window": "5", "failure_rate": "50"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Settings.WindowCount != 5 || r.Settings.MinRequests != 5 {
		t.Fatalf("count window 5: %+v", r.Settings)
	}
	r, _ = ParseRule("x", rulestore.Fields{"failure_rate": "50"})
	if r.Settings.WindowCount != 100 || r.Settings.MinRequests != 10 {
		t.Fatalf("default window: %+v", r.Settings)
	}
}

func TestRuleErrorsNameTheField(t *testing.T) {
	for field, f := range map[string]rulestore.Fields{
		"failure_threshold":  {"failure_threshold": "-1"},
		"success_threshold":  {"success_threshold": "0"},
		"open_duration":      {"open_duration": "soon"},
		"max_open_duration":  {"open_duration": "10s", "max_open_duration": "5s"},
		"window":             {"window": "0", "failure_rate": "50"},
		"failure_rate":       {"failure_rate": "101"},
		"slow_call_rate":     {"slow_call_rate": "50"},
		"slow_call_duration": {"slow_call_duration": "1s"},
		"min_requests":       {"window": "5", "failure_rate": "50", "min_requests": "6"},
		"failure_statuses":   {"failure_statuses": "600"},
		"key":                {"key": "static"},
		"state":              {"state": "open"},
		"status":             {"status": "99"},
		"headers":            {"headers": "no colon here"},
		"header":             {"header": "bad:name value"},
		"handle_errors":      {"handle_errors": "maybe"},
		"nonsense":           {"nonsense": "1"},
		"ramp_duration":      {"ramp_duration": "-1s"},
	} {
		_, err := ParseRule("x", f)
		var fe *rulestore.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%v: got %v, want a FieldError on %s", f, err, field)
		}
	}
	// window and min_requests alone do nothing: an error, not a silent no-op.
	if _, err := ParseRule("x", rulestore.Fields{"window": "10"}); err == nil {
		t.Error("window without a rate accepted")
	}
}
