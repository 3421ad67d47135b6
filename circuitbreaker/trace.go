package circuitbreaker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sluicegw/sluice/internal/handlerkit"
)

// traceDecision adds the breaker's decision to the request's span when it
// records: sluice.circuitbreaker.rule and .state (the state the request
// met: closed or half_open when admitted; open, half_open, forced_open or
// ramping when refused).
func traceDecision(ctx context.Context, rule, state string) {
	if span := handlerkit.Span(ctx); span != nil {
		span.SetAttributes(attribute.String("sluice.circuitbreaker.rule", rule),
			attribute.String("sluice.circuitbreaker.state", state))
	}
}
