// Package grayroute is Sluice's http.handlers.grayroute module (Caddyfile
// directive grayroute). It decides which version of a service serves a
// request and hands it to Caddy (a variable, placeholders and a request
// header); Caddy's own reverse_proxy does the proxying. It owns:
//
//   - the decision: rules matched by tag (header, query, cookie) and by
//     weight, with a hash that is deterministic per user on every instance
//     (decide.go, match.go, bucket.go), weight ramps over time (ramp.go),
//     and falling back when the version's breaker is open;
//   - the automatic canary analysis: per-interval counts from every
//     instance through Redis, sequential tests of errors and latency,
//     and the verdicts (advance, promote, roll back) written back into the
//     rule (analysis*.go), with the pause / resume / rollback / promote
//     actions (canary_admin.go);
//   - what operators read: metrics (metrics.go, analysis_metrics.go,
//     canary_state_metrics.go) and the grayroute section of
//     GET /sluice/state (admin.go).
//
// Rules come from the rule store (package rulestore) or are declared
// inline. docs/grayroute.md is the reference.
package grayroute
