package grayroute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicegw/sluice/rulestore"
)

// TestDecisionOnSpan: an untraced request allocates no more with the span
// hook than BenchmarkServeHTTP's one allocation (the placeholder
// provider), and a recording span gets the decision's attributes.
func TestDecisionOnSpan(t *testing.T) {
	h := newHandler(t, RuleRef{ID: "beta", Inline: graySpec(rulestore.Fields{
		"target_version": "v2", "weight": "20", "match_tag": "X-Beta", "match_value": "yes"})})
	request := func(ctx context.Context) *http.Request {
		r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
		r.Header.Set("X-Beta", "yes")
		r.Header.Set("X-User-Id", "user-1234567")
		vars := map[string]any{}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			vars["span_id"] = sc.SpanID().String() // as Caddy's tracing handler notes its span
		}
		ctx = context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer())
		ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, vars)
		return r.WithContext(ctx)
	}
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	w := httptest.NewRecorder()

	r := request(context.Background())
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r, next) }); n > 1 {
		t.Errorf("untraced request: %v allocations, want at most 1", n)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	if err := h.ServeHTTP(w, request(ctx), next); err != nil {
		t.Fatal(err)
	}
	span.End()
	got := map[string]string{}
	for _, kv := range rec.Ended()[0].Attributes() {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	if got["sluice.grayroute.rule"] != "beta" || (got["sluice.grayroute.version"] != "v1" && got["sluice.grayroute.version"] != "v2") {
		t.Errorf("span attributes %v", got)
	}
}
