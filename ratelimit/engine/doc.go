// Package engine holds the rate limit's local engines and key table, in
// plain Go with no Caddy and no Redis; times are passed in (ns on the
// caller's monotonic clock, Now), so tests run them on any clock.
//
// It owns:
//
//   - the quota arithmetic: token bucket (tokenbucket.go), sliding window
//     (slidingwindow.go), calendar windows in a time zone (calendar.go,
//     calendar_quota.go), pacing (pace.go) and warm-up (warmup.go), and
//     the flow shaping that decides with them (flow.go, behavior.go);
//   - Spec, what a rule's engine decides by (the handler's rule embeds
//     it; spec.go), its Limits (limits.go), and the Decision of one
//     request (engine.go);
//   - Local, the in-memory engine of one rule (engine.go): per-key rate
//     state, in-flight slots per key and per rule, the adaptive limit's
//     slot holder, settlements at the admitted entry (settle.go,
//     settle_count.go) and debt (debt.go);
//   - the key table (table.go, keyindex.go): entries without pointers, an
//     exact LRU under max_keys, idle expiry, and the eviction sketch whose
//     traces let an evicted key come back owing what it spent (evict.go,
//     sketch.go);
//   - reading a key's use without changing it (usage.go).
//
// The handler (package ratelimit) parses rules, resolves keys, talks to
// Redis for scope cluster and answers requests on top of it.
package engine
