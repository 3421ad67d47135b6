package ratelimit

import "github.com/sluicegw/sluice/ratelimit/engine"

// The engines' types under the names the handler has always given them
// (ratelimit/engine holds them).
type (
	Decision        = engine.Decision
	Reason          = engine.Reason
	LimitType       = engine.LimitType
	Limits          = engine.Limits
	Flow            = engine.Flow
	ControlBehavior = engine.ControlBehavior
	CalendarQuota   = engine.CalendarQuota
	Period          = engine.Period
)

const (
	Allowed              = engine.Allowed
	RateLimited          = engine.RateLimited
	TooManyInFlight      = engine.TooManyInFlight
	TooManyInFlightTotal = engine.TooManyInFlightTotal
	RedisUnavailable     = engine.RedisUnavailable
	OverAdaptiveLimit    = engine.OverAdaptiveLimit

	TokenBucket   = engine.TokenBucket
	SlidingWindow = engine.SlidingWindow
	Calendar      = engine.Calendar

	Reject     = engine.Reject
	Pace       = engine.Pace
	WarmUp     = engine.WarmUp
	WarmUpPace = engine.WarmUpPace
)

// Engine keeps one rule's counters and decides requests. The local engine
// (engine.Local, local.go) keeps them in this process's memory; the
// cluster engine (cluster.Engine, cluster_engine.go; scope cluster) keeps
// the rate counters in Redis behind the same interface and a local table
// for in-flight slots. It takes the handler's rule: the cluster engine
// reads more of it (its cluster.Rule) than the engine.Spec the local
// engine decides by.
type Engine interface {
	// Take decides one request of rule r for key at now (ns).
	Take(r *Rule, key []byte, now int64) Decision
	// Release frees the in-flight slot of an admitted request.
	Release(d *Decision)
	// Keys is the number of keys tracked.
	Keys() int64
	// InFlight is the number of admitted requests not finished yet.
	InFlight() int64
}
