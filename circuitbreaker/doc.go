// Package circuitbreaker is Sluice's http.handlers.circuitbreaker module
// (Caddyfile directive circuitbreaker). It owns:
//
//   - the breaker, in plain Go with an injected clock (breaker.go,
//     windows.go): closed / open / half-open per rule, and per key value
//     when the rule has a key, tripped by consecutive failures or by a
//     failure rate over a count or time window, with probes and a ramp
//     back to closed;
//   - what counts as a failure of the rest of the route (statuses, errors,
//     slow calls) and the open response, its headers and fallbacks
//     (handler.go, rule.go);
//   - IsOpen, which grayroute asks to route around an open version
//     (isopen.go);
//   - what operators read and do: metrics (metrics.go), the breakers'
//     section of GET /sluice/state, force open / closed overrides and keys
//     (admin.go, admin_keys.go, state.go), and events (events.go).
//
// Rules come from the rule store (package rulestore) or are declared
// inline. docs/circuitbreaker.md is the reference.
package circuitbreaker
