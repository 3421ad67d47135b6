// Package rulestore is the Caddy app that holds Sluice's rules and route
// bindings for every handler. It owns:
//
//   - the rules: static ones from the config, overlaid field by field by
//     rules kept in Redis and followed live through Pub/Sub, with resyncs,
//     reconnects, and a local snapshot that seeds a start without Redis
//     (overlay.go, redis.go, resync.go, reconnect.go, diskseed.go; the
//     file itself is package rulestore/snapshot, the connection settings
//     rulestore/redisconf);
//   - the rule kinds and their schema: typed specs, field parsing with
//     errors that name the field, typo suggestions (kinds.go, spec*.go,
//     fields.go, typos.go); handler packages register theirs; the value
//     syntax fields share is package rulestore/syntax;
//   - what handlers read on a request: Handle and Changes, atomic loads
//     from local memory, never a map or Redis (handle.go);
//   - writes and their feedback: validated writes with a change log and a
//     publish in one transaction, verdicts per instance, the fleet's last
//     good version, history and undo (write.go, apply.go, changelog.go,
//     verdicts.go, lastgood.go, history_store.go; the history's entries
//     and lists are package rulestore/history);
//   - the fleet: instance heartbeats (heartbeat.go) and the detection of a
//     Redis that lost its data (lossfence.go);
//   - what operators read: metrics (metrics.go), state and status queries
//     (state.go, status*.go), missing and rejected rules, events; and the
//     registry through which handler packages add their sections, actions
//     and views (registry.go).
//
// Handlers read rules from local memory only. The admin API and the status
// page that read and write the store live in package rulestore/admin.
// docs/rulestore.md is the reference.
package rulestore
