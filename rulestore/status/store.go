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

// StoreState is the rule store's part of GET /sluice/state.
type StoreState struct {
	// Status is the store's status, as GET /sluice/status shows it.
	Status
	// Source of the rules written through the admin API: redis or memory.
	Writes string `json:"writes"`
	// Versions of every rule in force, by kind then id (see rulestore.Version).
	Versions map[string]map[string]RuleVersion `json:"versions"`
	// Invalid lists rejected and missing rule ids (see InvalidRule).
	Invalid []InvalidRule `json:"invalid"`
}

// RuleVersion is one rule's version and where it comes from.
type RuleVersion struct {
	// Version is the rule's version (see rulestore.Rule.Version).
	Version string `json:"version"`
	// Source is static, redis or memory (see rulestore.Rule.Source).
	Source string `json:"source"`
}

// Connection is what the store's Redis source reports of its connection.
type Connection struct {
	Connected bool
	// LastResync is the end of the last full resync, zero before the first.
	LastResync                 time.Time
	Resyncs, Updates, Rejected int64
	Pool                       PoolStatus
}
