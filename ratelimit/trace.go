package ratelimit

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicegw/sluice/internal/handlerkit"
)

// spanAttrs are the placeholders a decision adds to a recording span
// (sluice.ratelimit.rule, .result, .remaining, .limit, .retry_after); the
// key is left out, as it may identify a user.
var spanAttrs = handlerkit.SpanAttrs("http.ratelimit.rule", "http.ratelimit.result",
	"http.ratelimit.remaining", "http.ratelimit.limit", "http.ratelimit.retry_after")

// trace adds the decision, as it stands when the request is done, to span.
func (p *placeholders) trace(span trace.Span) {
	handlerkit.AddDecision(span, *p, spanAttrs)
}
