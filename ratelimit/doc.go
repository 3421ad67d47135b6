// Package ratelimit is Sluice's http.handlers.ratelimit module (Caddyfile
// directive ratelimit). It owns every decision of whether a request may
// pass a quota, and what the client is told:
//
//   - the local engines and the key table, in package ratelimit/engine
//     (token bucket, sliding window, calendar quotas, pacing and warm-up,
//     per-key state under max_keys with eviction traces), and the adaptive
//     in-flight limit in ratelimit/overload, a paced request's wait and
//     the flow metrics in ratelimit/flow; here their Caddy glue
//     (local.go, adaptive*.go, flow*.go);
//   - scope cluster: the same quotas kept in Redis, in package
//     ratelimit/cluster (the cluster engine with its leases, remembered
//     refusals and on_redis_error fallbacks; the scripts, the batcher and
//     the health gate, the decision of several cluster limits by one
//     script); here its glue (cluster_engine.go, multi_cluster.go);
//   - in-flight caps (max_concurrent, max_concurrent_total), costs declared
//     by the request and settled from the response (count_status,
//     response_cost; cost.go, settle.go, debt.go; how a response ended and
//     what it reported is ratelimit/settlement), overrides per key, and
//     several rules on one route, all of which must admit (multi*.go);
//   - nested quotas, a rule's parent and guarantee decided along its tree
//     by ratelimit/nested (nested_*.go), and soft limits, over_limit tag
//     and demote (overlimit.go);
//   - the request's path, one pipeline of named steps for one rule or
//     several (pipeline*.go: resolve, keys, decide, report, reject, serve),
//     and the response (reject.go, multi_headers.go, headers*.go; the
//     header values and bodies are ratelimit/answer): the key, refusals,
//     RateLimit and X-RateLimit-* headers, Retry-After, the
//     {http.ratelimit.*} placeholders, shadow mode;
//   - what operators read: metrics (metrics.go, flow_metrics.go), the
//     ratelimit section of GET /sluice/state and its events (admin.go,
//     debt.go; their shapes and samplers are ratelimit/report),
//     and one key's usage, GET /sluice/quota/{rule}/{key} (quota_*.go);
//   - previews of a rule change: the record of each rule's recent traffic
//     (record.go, into package ratelimit/replay) and the replay of it that
//     answers the store's previews (preview.go).
//
// Rules come from the rule store (package rulestore: static, Redis or
// inline) and are read from local memory on every request; a request on a
// local rule touches only local memory. docs/ratelimit.md is the
// reference.
package ratelimit
