package grayroute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/rulestore"
)

func TestAnalysisOnInlineRuleRefused(t *testing.T) {
	h := &Handler{Rules: []RuleRef{{ID: "c", Inline: graySpec(rulestore.Fields{"target_version": "v2", "fallback_version": "v1",
		"analysis": "on", "step_weight": "10"})}}}
	err := h.setup(&rulestore.App{}, nil, zap.NewNop())
	if err == nil {
		h.Cleanup()
		t.Fatal("analysis on an inline rule accepted")
	}
}

// TestOutcomesCounted: what counts as a request and as an error of a cohort.
func TestOutcomesCounted(t *testing.T) {
	h := newHandler(t, RuleRef{ID: "plain", Inline: graySpec(rulestore.Fields{"target_version": "v2"})})
	t.Cleanup(func() { h.Cleanup() })
	for _, c := range []struct {
		name           string
		next           caddyhttp.HandlerFunc
		cancel         bool
		requests, errs uint64
	}{
		{"200", func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(200); return nil }, false, 1, 0},
		{"body without WriteHeader", func(w http.ResponseWriter, r *http.Request) error { w.Write([]byte("ok")); return nil }, false, 1, 0},
		{"404 is the client's", func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(404); return nil }, false, 1, 0},
		{"503 from upstream", func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(503); return nil }, false, 1, 1},
		{"dial error (502)", func(w http.ResponseWriter, r *http.Request) error {
			return caddyhttp.Error(502, context.DeadlineExceeded)
		}, false, 1, 1},
		{"timeout (504)", func(w http.ResponseWriter, r *http.Request) error {
			return caddyhttp.Error(504, context.DeadlineExceeded)
		}, false, 1, 1},
		{"plain error", func(w http.ResponseWriter, r *http.Request) error { return context.DeadlineExceeded }, false, 1, 1},
		{"client closed (499)", func(w http.ResponseWriter, r *http.Request) error { return caddyhttp.Error(499, context.Canceled) }, false, 0, 0},
		{"client cancelled", func(w http.ResponseWriter, r *http.Request) error { return caddyhttp.Error(502, context.Canceled) }, true, 0, 0},
	} {
		var cc cohortCounts
		r := httptest.NewRequest("GET", "/", nil)
		if c.cancel {
			ctx, cancel := context.WithCancel(r.Context())
			cancel()
			r = r.WithContext(ctx)
		}
		h.serveCounted(httptest.NewRecorder(), r, c.next, &cc)
		var latency uint64
		for i := range cc.latency {
			latency += cc.latency[i].Load()
		}
		if cc.requests.Load() != c.requests || cc.errors.Load() != c.errs || latency != c.requests {
			t.Errorf("%s: counted %d requests, %d errors, %d latencies; want %d, %d, %d", c.name,
				cc.requests.Load(), cc.errors.Load(), latency, c.requests, c.errs, c.requests)
		}
	}
}
