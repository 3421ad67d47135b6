package handlerkit

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Span returns the request's span when it is recording (Caddy's `tracing`
// handler runs before this one and sampled the request), else nil. A
// handler builds its decision's attributes only for a non-nil span, so an
// untraced request pays one context lookup and nothing else.
func Span(ctx context.Context) trace.Span {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	return span
}

// tracingSpanVar is the var Caddy's `tracing` handler sets to the id of
// the span it opens for a request ({http.vars.span_id}).
const tracingSpanVar = "span_id"

// Span is the package's Span for the request p belongs to. Caddy's
// tracing handler notes each span it opens in the request's vars, so with
// the vars map known and no span noted in it there is no span to find, and
// the context is not walked (a lookup that finds nothing compares every
// value the server and net/http put in it).
func (p Placeholders) Span(ctx context.Context) trace.Span {
	if p.vars != nil {
		if _, ok := p.vars[tracingSpanVar]; !ok {
			return nil
		}
	}
	return Span(ctx)
}

// SpanAttr is a placeholder recorded on a span as the attribute Key.
type SpanAttr struct {
	Placeholder string
	Key         attribute.Key
}

// SpanAttrs names each placeholder's span attribute: the placeholder's
// name with "sluice." for "http.", so {http.ratelimit.rule} is recorded
// as sluice.ratelimit.rule. Called once per package, at init.
func SpanAttrs(placeholders ...string) []SpanAttr {
	out := make([]SpanAttr, len(placeholders))
	for i, p := range placeholders {
		out[i] = SpanAttr{Placeholder: p, Key: attribute.Key("sluice." + strings.TrimPrefix(p, "http."))}
	}
	return out
}

// AddDecision records on span the attrs whose placeholders v answers:
// the handler's decision as its placeholders show it.
func AddDecision(span trace.Span, v Values, attrs []SpanAttr) {
	kvs := make([]attribute.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		val, ok := v.Placeholder(a.Placeholder)
		if !ok {
			continue
		}
		kvs = append(kvs, spanValue(a.Key, val))
	}
	span.SetAttributes(kvs...)
}

// spanValue types a placeholder's value as an attribute.
func spanValue(k attribute.Key, v any) attribute.KeyValue {
	switch v := v.(type) {
	case string:
		return k.String(v)
	case int64:
		return k.Int64(v)
	case int:
		return k.Int(v)
	case float64:
		return k.Float64(v)
	case bool:
		return k.Bool(v)
	case fmt.Stringer:
		return k.String(v.String())
	}
	return k.String(fmt.Sprint(v))
}
