// Package faults is Sluice's fault and abuse suite: it runs Caddy with the
// full chain (ratelimit → circuitbreaker → grayroute → reverse_proxy) on real
// Redis under load from a load generator inside the test, injects faults
// (Redis killed, restarted empty, paused, partitioned, flapping; reloads;
// hostile rules, messages, keys and headers) and checks invariants: no
// failed request, bounded latency, no leaked goroutines or connections,
// nothing lost. Everything runs on loopback.
//
// The package has only tests. `go test ./faults/` runs the short version
// (load phases of a couple of seconds); SLUICE_SOAK=1 (`make soak`) runs
// the long one. See docs/reliability.md for the invariants and figures.
package faults
