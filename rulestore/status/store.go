package status

import "time"

// Status describes the store: where rules come from and how fresh they are.
type Status struct {
	// Redis: the store follows Redis (false: the config's rules only).
	Redis bool `json:"redis"`
	// Connected: the last call to Redis succeeded.
	Connected bool `json:"connected"`
	// LastResync is when the last full reconciliation with Redis ended.
	LastResync *time.Time `json:"last_resync,omitempty"`
	// Resyncs counts the full reconciliations so far.
	Resyncs int64 `json:"resyncs"`
	// Rejected counts the rule versions from Redis that failed validation.
	Rejected int64 `json:"rejected"`
	// Rules counts the rules in force, by kind.
	Rules map[string]int `json:"rules"`
	// Pool is the Redis client's connection pool, present with Redis.
	Pool *PoolStatus `json:"pool,omitempty"`
}

// PoolStatus counts the connections the store's Redis client holds. Every
// connection Redis sees from this instance is one of Open or PubSub: a
// difference is a leak.
type PoolStatus struct {
	// Open is the number of pooled command and pipeline connections, busy
	// or idle.
	Open uint32 `json:"open"`
	// Idle is how many of Open wait unused in the pool.
	Idle uint32 `json:"idle"`
	// PubSub is the number of open subscriber connections.
	PubSub uint32 `json:"pubsub"`
	// Timeouts counts waits for a free connection that timed out.
	Timeouts uint32 `json:"timeouts"`
}
