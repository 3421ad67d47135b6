package circuitbreaker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicegw/sluice/internal/handlerkit"
)

// traceDecision adds the breaker's decision to the request's span when it
// records: sluice.circuitbreaker.rule and .state (the state the request
// met: closed or half_open when admitted; open, half_open, forced_open or
// ramping when refused).
func traceDecision(ctx context.Context, pub handlerkit.Placeholders, rule, state string) {
	if span := pub.Span(ctx); span != nil {
		traceState(span, rule, state)
	}
}

// traceState records the decision on a recording span; an admitted
// request reads its breaker's state only for one.
func traceState(span trace.Span, rule, state string) {
	span.SetAttributes(attribute.String("sluice.circuitbreaker.rule", rule),
		attribute.String("sluice.circuitbreaker.state", state))
}
