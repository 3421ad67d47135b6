// Package cluster is the rate limit's scope cluster: a rule's quota kept
// in Redis and spent by every instance, the decisions made on it, and
// what they, settlements and reads send to Redis. It imports no Caddy.
//
// It owns:
//
//   - the cluster engine (Engine; engine*.go): in-flight caps locally, the
//     rate in Redis, exact or by leases topped up in the background,
//     refusals Redis told remembered per key, pacing and warm-up slots in
//     the fleet's schedule, calendar windows, settlements, and the
//     on_redis_error fallbacks (allow, deny, or this instance's share of
//     the quota). It reads the rule's cluster view (Rule: id, engine.Spec,
//     on_redis_error, redis_timeout, lease_size) and takes its clock,
//     Redis and counters from its Host, the handler's limiter;
//   - the decision of a request by several cluster rules in one script,
//     spending on all or none (DecideAll; decide_all.go, engine_multi.go);
//   - the Lua scripts and their replies: token bucket and sliding window
//     decisions over many keys (redisscript.go, script_source.go,
//     script_floor.go), several rules at once (redisscript_multi.go),
//     pacing (cluster_pace_script.go), warm-up (cluster_warm_script.go),
//     calendar windows (script_calendar.go), settlements
//     (script_settle.go) and a nested quota's spend along its tree
//     (script_nested.go, nested_spend.go: nested.Spend in Lua, its keys
//     under the tree's root key), with the checks that treat a damaged value as
//     none (script_valid.go);
//   - the names of the keys in Redis, and Redis Cluster hash slots
//     (redisscript.go, script_calendar.go, keyslot.go), and the reads of
//     a key's value for GET /sluice/quota (read.go);
//   - the Batcher: decisions waiting on one client leave together in
//     pipelined batches, one script call per engine and slot, each
//     decision keeping its own redis_timeout (batcher.go,
//     batcher_deadline.go);
//   - the health gate of a client: down after a failed call, probed until
//     Redis answers, and the transitions metric (gate.go).
package cluster
