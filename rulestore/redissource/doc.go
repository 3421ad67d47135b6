// Package redissource is the rule store's Redis source: the rulestore.Source
// the app holds when a config names Redis. It owns:
//
//   - following the rules kept in Redis: a subscription to the rule
//     channels, re-reads of the ids named there in batches, full resyncs,
//     reconnects with backoff, and a local snapshot that seeds a start
//     without Redis (follow.go, refresh.go, update.go, resync.go,
//     reconnect.go, diskseed.go);
//   - the Redis contract's key names (keys.go) and the change log
//     (changelog.go);
//   - the fleet: heartbeats, declarations, the detection of a Redis that
//     lost its data (heartbeat.go, declares.go, lossfence.go);
//   - feedback to writers: verdicts per instance, history, the fleet's
//     last good version, unused rules (feedback.go, history.go,
//     lastgood.go, unused.go, status_health.go);
//   - the write paths in Redis: a write, an atomic apply, a patch (write.go,
//     patch.go), and the status queries that read Redis (source.go,
//     changes.go).
//
// It registers itself with rulestore.RegisterRedisSource; a build that
// follows Redis imports it (package sluice and caddyfile do).
package redissource

import "github.com/sluicegw/sluice/rulestore"

// clip shortens untrusted text for a log line.
func clip(s string) string { return rulestore.Clip(s, 64) }
