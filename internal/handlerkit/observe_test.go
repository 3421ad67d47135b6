package handlerkit

import (
	"context"
	"testing"

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
