package circuitbreaker

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicegw/sluice/internal/handlerkit"
)

// TestTraceDecision: without a recording span the decision costs no
// allocation; with one, the span gets the rule and the state.
func TestTraceDecision(t *testing.T) {
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { traceDecision(ctx, handlerkit.Placeholders{}, "orders", StateClosed.String()) }); n != 0 {
		t.Errorf("untraced: %v allocations, want 0", n)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("test").Start(ctx, "request")
	traceDecision(ctx, handlerkit.Placeholders{}, "orders", StateOpen.String())
	span.End()
	got := map[string]string{}
	for _, kv := range rec.Ended()[0].Attributes() {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	if got["sluice.circuitbreaker.rule"] != "orders" || got["sluice.circuitbreaker.state"] != "open" {
		t.Errorf("span attributes %v", got)
	}
}
