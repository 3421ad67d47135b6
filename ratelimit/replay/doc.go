// Package replay records a rule's recent traffic and replays it against
// a proposed rule, to tell what a change would have done before it is in
// force (docs/design/previews.md). Plain Go, no Caddy and no Redis: times
// are int64 ns on the engine's clock (engine.Now), passed in.
//
// It owns:
//
//   - the Recorder (recorder.go): per rule, a bounded ring of fixed-size
//     records (arrival, key hash, cost, outcome, in-flight seen), in
//     shards by key hash, sampled by key when traffic outgrows the ring
//     for its window; and a small table of key names (names.go);
//   - the Trace (trace.go): a copy of the records of the last window;
//   - Replay (replay.go): the trace decided by fresh local engines for
//     the rules in force and the proposed ones, giving an Impact
//     (impact.go) that Merge sums over instances.
package replay
