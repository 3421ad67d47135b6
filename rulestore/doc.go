// Package rulestore is the Caddy app that holds Sluice's rules and route
// bindings for every handler. It owns:
//
//   - the rules: static ones from the config, overlaid field by field by
//     the rules of a source (overlay.go): the Source interface the app
//     holds (source.go, layer.go), this process's memory without Redis
//     (memory.go), or Redis, whose follower and write paths are package
//     rulestore/redissource (it registers itself: RegisterRedisSource);
//     the connection settings are rulestore/redisconf, the local snapshot's
//     file rulestore/snapshot;
//   - the rule kinds and their schema: typed specs, field parsing with
//     errors that name the field, typo suggestions (kinds.go, spec*.go,
//     fields.go, typos.go); handler packages register theirs; the raw
//     fields themselves are package rulestore/rawfields, the value
//     syntax fields share rulestore/syntax;
//   - what handlers read on a request: Handle and Changes, atomic loads
//     from local memory, never a map or Redis (handle.go);
//   - writes: validated writes, atomic applies and patches, whatever the
//     source (write.go, apply.go, patch.go), failing with typed errors
//     (errors.go: package rulestore/storeerr); the history's entries and
//     lists are package rulestore/history; a dry run's impact, asked of
//     the Previewer a kind's handler registers, fleet-wide through the
//     Redis source (preview.go);
//   - what operators read: metrics (metrics.go), state and status queries
//     (state.go, status*.go, verdicts.go; their shapes are package
//     rulestore/status), missing rules (missing_log.go: package
//     rulestore/missing) and rejected ones, events and the tick
//     (events.go: package rulestore/eventqueue); and the registry through
//     which handler packages add their sections, actions and views
//     (registry.go).
//
// Handlers read rules from local memory only. The admin API and the status
// page that read and write the store live in package rulestore/admin.
// docs/rulestore.md is the reference.
package rulestore
