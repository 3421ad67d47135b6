// Package report holds what operators read of the rate limits, apart from
// the request's path: the shapes the handler fills and the bookkeeping of
// its events. Nothing here runs on a request except DebtLog.Add, one
// atomic store when a settlement takes a key into debt. Package ratelimit
// reads its limiters into these (its admin.go, debt.go, flow_state.go)
// and emits the events through the rule store.
//
// It owns:
//
//   - the ratelimit section of GET /sluice/state: a rule's counts, keys,
//     in-flight requests and top keys (state.go), and its flow shaping,
//     the pacing queue and the adaptive limit by priority class (flow.go);
//   - the ratelimit_exceeded event: once a second the refusals counted
//     since the last event, at most one event per rule per interval
//     (exceeded.go);
//   - the ratelimit_debt event: the keys that settlements took into debt,
//     kept in a small ring on the request path and sampled on the tick
//     (debt.go).
package report
