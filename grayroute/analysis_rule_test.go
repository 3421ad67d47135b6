package grayroute_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/grayroute"
	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// analysisBad are analysis rules that must be refused, with the field the
// error names.
var analysisBad = []struct {
	name  string
	f     rulestore.Fields
	field string
}{
	{"max_step_duration below the interval", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "analysis_interval": "10s", "max_step_duration": "5s"}, "max_step_duration"},
	{"analysis without fallback_version", rulestore.Fields{"target_version": "v2", "analysis": "on", "step_weight": "10"}, "fallback_version"},
	{"min_samples 0", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "min_samples": "0"}, "min_samples"},
	{"max_weight over 100", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "max_weight": "150"}, "max_weight"},
	{"step_weight 0", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "0"}, "step_weight"},
	{"no step_weight", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on"}, "step_weight"},
	{"analysis with a ramp", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "ramp": "2026-12-01T10:00:00Z 1h"}, "ramp"},
	{"field without analysis", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "min_samples": "10"}, "min_samples"},
	{"bad state", rulestore.Fields{"target_version": "v2", "state": "gone"}, "state"},
	{"interval too short", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "analysis_interval": "1ms"}, "analysis_interval"},
	{"percentile", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "latency_percentile": "100"}, "latency_percentile"},
	{"latency ratio", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "max_latency_ratio": "0.5"}, "max_latency_ratio"},
	{"min_latency_delta negative", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "min_latency_delta": "-1ms"}, "min_latency_delta"},
	{"min_latency_delta over a minute", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "min_latency_delta": "61s"}, "min_latency_delta"},
	{"min_latency_delta without analysis", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "min_latency_delta": "5ms"}, "min_latency_delta"},
	{"failure_threshold", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "failure_threshold": "0"}, "failure_threshold"},
	{"max_step_duration negative", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "max_step_duration": "-1s"}, "max_step_duration"},
	{"max_step_duration over a day", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "max_step_duration": "25h"}, "max_step_duration"},
	{"on_no_evidence", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "analysis": "on", "step_weight": "10", "on_no_evidence": "promote"}, "on_no_evidence"},
	{"on_no_evidence without analysis", rulestore.Fields{"target_version": "v2", "fallback_version": "v1", "on_no_evidence": "hold"}, "on_no_evidence"},
}

func TestAnalysisFieldsRefusedNamingTheField(t *testing.T) {
	for _, c := range analysisBad {
		_, err := rulestore.Parse(rulestore.Gray, "r", c.f)
		var fe *rulestore.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.field)
		}
	}
	v, err := rulestore.Parse(rulestore.Gray, "r", rulestore.Fields{"target_version": "v2", "fallback_version": "v1",
		"analysis": "on", "step_weight": "5", "max_weight": "40", "min_samples": "50", "analysis_interval": "2s",
		"max_latency_ratio": "1.5", "min_latency_delta": "3ms", "latency_percentile": "95", "failure_threshold": "3", "state": "paused",
		"max_step_duration": "5s", "on_no_evidence": "hold"})
	if err != nil {
		t.Fatal(err)
	}
	g := v.(*grayroute.Rule)
	a := g.Analysis
	if a == nil || a.StepWeight != 500 || a.MaxWeight != 4000 || a.MinSamples != 50 || a.Interval.Seconds() != 2 ||
		a.MaxLatencyRatio != 1.5 || a.MinLatencyDelta != 3*time.Millisecond || a.LatencyPercentile != 95 || a.FailureThreshold != 3 || g.State != grayroute.StatePaused ||
		a.MaxStepDuration != 5*time.Second || a.MaxStepIntervals != 3 || !a.HoldWithoutEvidence { // 5s of 2s intervals: 3

		t.Fatalf("parsed %+v state %v", a, g.State)
	}
	if g.Weight != 500 {
		t.Errorf("weight %d without a weight field, want step_weight (500)", g.Weight)
	}
	v, err = rulestore.Parse(rulestore.Gray, "r", rulestore.Fields{"target_version": "v2", "fallback_version": "v1",
		"analysis": "on", "step_weight": "5"})
	if err != nil {
		t.Fatal(err)
	}
	if d := v.(*grayroute.Rule).Analysis.MinLatencyDelta; d != grayroute.DefaultMinLatencyDelta {
		t.Errorf("min_latency_delta %v when unset, want the default %v", d, grayroute.DefaultMinLatencyDelta)
	}
	if a := v.(*grayroute.Rule).Analysis; a.MaxStepDuration != grayroute.DefaultMaxStepDuration || a.MaxStepIntervals != 30 || a.HoldWithoutEvidence {
		t.Errorf("max_step_duration %v (%d intervals), hold %v when unset, want %v (30 of the default 10s), advance",
			a.MaxStepDuration, a.MaxStepIntervals, a.HoldWithoutEvidence, grayroute.DefaultMaxStepDuration)
	}
	v, err = rulestore.Parse(rulestore.Gray, "r", rulestore.Fields{"target_version": "v2", "fallback_version": "v1",
		"analysis": "on", "step_weight": "5", "max_step_duration": "0"})
	if err != nil || v.(*grayroute.Rule).Analysis.MaxStepIntervals != 0 {
		t.Errorf("max_step_duration 0: %v, %v; want no bound", err, v)
	}
	v, err = rulestore.Parse(rulestore.Gray, "r", rulestore.Fields{"target_version": "v2", "fallback_version": "v1",
		"analysis": "on", "step_weight": "5", "min_latency_delta": "0"})
	if err != nil || v.(*grayroute.Rule).Analysis.MinLatencyDelta != 0 {
		t.Errorf("min_latency_delta 0: %v, %v; want no floor", err, v)
	}
}

// The step bound's fields in a Caddyfile reach the rule's JSON under the
// same names as in Redis and on the admin API.
func TestAnalysisStepBoundInACaddyfile(t *testing.T) {
	cfg := "{\n\trulestore {\n\t\tgray r {\n\t\t\ttarget_version v2\n\t\t\tfallback_version v1\n\t\t\tanalysis on\n\t\t\tstep_weight 10\n" +
		"\t\t\tmax_step_duration 2m\n\t\t\ton_no_evidence hold\n\t\t}\n\t}\n}\nhttp://127.0.0.1:1 {\n\tgrayroute r\n\trespond ok\n}\n"
	if err := testcaddy.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	js, err := testcaddy.Adapt(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"max_step_duration":"2m0s"`) && !strings.Contains(string(js), `"max_step_duration":"2m"`) ||
		!strings.Contains(string(js), `"on_no_evidence":"hold"`) {
		t.Fatalf("adapted JSON lacks the step bound: %s", js)
	}
}

// The same refusals in a Caddyfile: `caddy validate` names the field.
func TestAnalysisFieldsRefusedAtValidate(t *testing.T) {
	for _, c := range analysisBad[:4] {
		var b strings.Builder
		for _, name := range c.f.Names() {
			fmt.Fprintf(&b, "\t\t\t%s %s\n", name, c.f[name])
		}
		cfg := fmt.Sprintf("{\n\trulestore {\n\t\tgray r {\n%s\t\t}\n\t}\n}\nhttp://127.0.0.1:1 {\n\tgrayroute r\n\trespond ok\n}\n", b.String())
		err := testcaddy.Validate(cfg)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: validate said %v, want an error naming %s", c.name, err, c.field)
		}
	}
}

// The same refusals on the admin API: 400 naming the field, nothing stored.
func TestAnalysisFieldsRefusedOnTheAdminAPI(t *testing.T) {
	r := redistest.Start(t)
	addr, _ := site(t)
	admin := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf("{\n\tadmin localhost:%d\n\tpersist_config off\n\trulestore {\n\t\tredis %s\n\t}\n}\n%s {\n\tgrayroute r\n\trespond ok\n}\n", admin, r.URL(), addr))
	for _, c := range analysisBad[:4] {
		body := "{"
		for i, name := range c.f.Names() {
			if i > 0 {
				body += ","
			}
			body += fmt.Sprintf("%q:%q", name, c.f[name])
		}
		body += "}"
		req, _ := http.NewRequest("PUT", fmt.Sprintf("http://localhost:%d/sluice/rules/gray/r", admin), strings.NewReader(body))
		resp, text := testcaddy.Do(t, req)
		if resp.StatusCode != 400 || !strings.Contains(text, c.field) {
			t.Errorf("%s: %d %s, want 400 naming %s", c.name, resp.StatusCode, text, c.field)
		}
	}
	if n := r.Client().Exists(t.Context(), "gray:rule:r").Val(); n != 0 {
		t.Fatalf("a refused rule reached redis")
	}
}

// The same refusals written straight into Redis (HSET + PUBLISH): the
// store rejects the rule, its status hash names the field, and the rule is
// not in force.
func TestAnalysisFieldsRefusedFromRedis(t *testing.T) {
	r := redistest.Start(t)
	rc := r.Client()
	addr, _ := site(t)
	admin := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf("{\n\tadmin localhost:%d\n\tpersist_config off\n\trulestore {\n\t\tredis %s\n\t}\n}\n%s {\n\tgrayroute r\n\trespond ok\n}\n", admin, r.URL(), addr))
	for _, c := range analysisBad[:4] {
		rc.Del(t.Context(), "gray:rule:r")
		args := []any{}
		for _, name := range c.f.Names() {
			args = append(args, name, c.f[name])
		}
		if err := rc.HSet(t.Context(), "gray:rule:r", args...).Err(); err != nil {
			t.Fatal(err)
		}
		rc.Publish(t.Context(), "gateway:rules:gray", "r")
		var status map[string]string
		testcaddy.Eventually(t, 10*time.Second, c.name+": the rejection in gateway:status:gray:r", func() bool {
			status = rc.HGetAll(t.Context(), "gateway:status:gray:r").Val()
			for _, v := range status {
				if strings.Contains(v, `"state":"rejected"`) && strings.Contains(v, `"field":"`+c.field+`"`) {
					return true
				}
			}
			return false
		})
		if resp, text := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/rules/gray/r", admin)); resp.StatusCode != 404 {
			t.Errorf("%s: the refused rule is in force: %d %s", c.name, resp.StatusCode, text)
		}
	}
}
