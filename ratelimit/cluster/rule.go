package cluster

import (
	"time"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

// Rule is a rate_limit rule as the cluster engine reads it: its id (part
// of every Redis key), what the engines decide by, and scope cluster's
// fields. The handler's rule embeds it; the engine compares its address
// to tell the rule's versions apart.
type Rule struct {
	ID string
	// Spec holds what the engines decide by: the type, quotas, overrides,
	// cost, in-flight caps, max_keys, flow shaping and calendar period.
	engine.Spec

	// Cluster scope (scope cluster): what to do when Redis fails, how long
	// one Redis call may take, and the lease size (0 = one call per request).
	OnRedisError RedisErrorMode
	RedisTimeout time.Duration
	LeaseSize    int64
}

// RedisErrorMode is what a cluster rule does while Redis is unreachable.
type RedisErrorMode uint8

const (
	// FailLocal decides by an in-process limiter holding this instance's
	// share of the quota (quota ÷ live instances).
	FailLocal RedisErrorMode = iota
	// FailAllow lets every request pass.
	FailAllow
	// FailDeny refuses every request with the rule's redis_error_status.
	FailDeny
)

func (m RedisErrorMode) String() string {
	switch m {
	case FailAllow:
		return "allow"
	case FailDeny:
		return "deny"
	}
	return "local"
}
