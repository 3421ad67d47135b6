package handlerkit

import (
	"context"
	"testing"

	"github.com/caddyserver/caddy/v2"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestSpanUntracedAllocatesNothing: on a request without a recording
// span (no `tracing`, or a span context that is not sampled), Span costs
// no allocation and returns nil, so no handler builds attributes.
func TestSpanUntracedAllocatesNothing(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	for name, ctx := range map[string]context.Context{
		"no span":       context.Background(),
		"not recording": trace.ContextWithSpanContext(context.Background(), sc),
	} {
		if Span(ctx) != nil {
			t.Fatalf("%s: Span returned a span", name)
		}
		if n := testing.AllocsPerRun(1000, func() { _ = Span(ctx) }); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}

// TestSpanOfARequestLooksWhereCaddysTracingNotedOne: with the request's
// vars map known, the span is looked up only when Caddy's tracing handler
// noted one there (span_id); without the map, the context is asked.
func TestSpanOfARequestLooksWhereCaddysTracingNotedOne(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	repl := caddy.NewReplacer()
	noted := map[string]any{"span_id": span.SpanContext().SpanID().String()}
	if PlaceholdersIn(repl, noted).Span(ctx) != span {
		t.Error("span noted in the vars: not found")
	}
	if PlaceholdersIn(nil, nil).Span(ctx) != span {
		t.Error("outside a server (no replacer, no vars): the context's span not found")
	}
	if got := PlaceholdersIn(repl, map[string]any{}).Span(ctx); got != nil {
		t.Error("no span noted in the vars: a span returned")
	}
	unnoted := PlaceholdersIn(repl, map[string]any{"client_ip": "10.0.0.1"})
	if n := testing.AllocsPerRun(1000, func() { _ = unnoted.Span(ctx) }); n != 0 {
		t.Errorf("no span noted: %v allocations, want 0", n)
	}
}
