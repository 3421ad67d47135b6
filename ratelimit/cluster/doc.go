// Package cluster is the Redis side of the rate limit's scope cluster:
// what a cluster rule's decisions, settlements and reads send to Redis,
// and how. It imports no Caddy; the decisions themselves (leases, the
// on_redis_error fallbacks) stay with the handler's cluster engine.
//
// It owns:
//
//   - the Lua scripts and their replies: token bucket and sliding window
//     decisions over many keys (redisscript.go, script_source.go,
//     script_floor.go), several rules at once (redisscript_multi.go),
//     pacing (cluster_pace_script.go), warm-up (cluster_warm_script.go),
//     calendar windows (script_calendar.go) and settlements
//     (script_settle.go), with the checks that treat a damaged value as
//     none (script_valid.go);
//   - the names of the keys in Redis, and Redis Cluster hash slots
//     (redisscript.go, script_calendar.go, keyslot.go);
//   - the Batcher: decisions waiting on one client leave together in
//     pipelined batches, one script call per engine and slot, each
//     decision keeping its own redis_timeout (batcher.go,
//     batcher_deadline.go);
//   - the health gate of a client: down after a failed call, probed until
//     Redis answers, and the transitions metric (gate.go).
package cluster
