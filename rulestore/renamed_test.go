package rulestore

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The store knows a kind's renamed fields from the kind's Spec, with no
// handler package linked in to register them: circuit_breaker's header
// warns to use headers, and nothing else warns.
func TestRenamedFieldsFromSpec(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	logger := zap.New(core)
	WarnRenamed(logger, CircuitBreaker, "cb", Fields{"header": "X-A 1", "headers": "X-B: 2", "status": "503"})
	WarnRenamed(logger, RateLimit, "rl", Fields{"header": "x", "headers": "true"})
	WarnRenamed(logger, Gray, "g", Fields{"header": "x"})
	got := logs.All()
	if len(got) != 1 {
		t.Fatalf("%d warnings, want 1 (circuit_breaker's header): %v", len(got), got)
	}
	e, ctx := got[0], got[0].ContextMap()
	if e.Message != "deprecated rule field: use headers instead" || ctx["kind"] != "circuit_breaker" || ctx["rule"] != "cb" ||
		ctx["field"] != "header" || ctx["use"] != "headers" {
		t.Fatalf("warning %q %v, want circuit_breaker cb's header to use headers", e.Message, ctx)
	}
}
