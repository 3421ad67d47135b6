package report

// Top keys: the most used keys of a rule, bounded, and masked: the key's
// preset prefix ("user:", "ip:"...) is kept, the value replaced by the
// first 12 hex digits of the SHA-256 of the whole key, so an operator can
// check a suspect (`printf %s user:alice | sha256sum | cut -c1-12`)
// without the state endpoint listing user ids or addresses.
const (
	// StateTopKeys bounds a rule's top keys in GET /sluice/state.
	StateTopKeys = 10
	// EventTopKeys bounds the keys an event lists.
	EventTopKeys = 5
)

// RuleState is one rule in GET /sluice/state.
type RuleState struct {
	// Rule is the rule's id.
	Rule string `json:"rule"`
	// Type is its limit_type: token_bucket, sliding_window or calendar.
	Type string `json:"type"`
	// Scope is local or cluster.
	Scope string `json:"scope"`
	// Requests counts decisions by result (allowed, rejected,
	// shadow_rejected, concurrency_rejected, ...) since the rule id was
	// first used by this process.
	Requests map[string]int64 `json:"requests"`
	// Keys counts the keys the rule tracks now on this instance.
	Keys int64 `json:"keys"`
	// InFlight counts the rule's requests inside the gateway now.
	InFlight int64 `json:"in_flight"`
	// TopKeys are the keys using most of their quota, most used first (at
	// most 10; none for a rule without a rate).
	TopKeys []KeyUsage `json:"top_keys"`
	// Flow: pacing queue and adaptive limit, for rules that shape flow.
	Flow *FlowState `json:"flow,omitempty"`
	// ExceededHeld counts the refusals the ratelimit_exceeded sampler has
	// seen but holds for the rule's next event (one per
	// ExceededEventInterval at most).
	ExceededHeld int64 `json:"exceeded_held"`
}

// KeyUsage is one key's use of its quota right now.
type KeyUsage struct {
	// Key is the key, masked unless the rule has raw_keys.
	Key string `json:"key"`
	// Remaining is the whole tokens or requests left.
	Remaining int64 `json:"remaining"`
	// Used is what is spent of the key's quota, in the quota's units (tokens
	// or requests), as GET /sluice/quota/{rule}/{key} counts it.
	Used float64 `json:"used"`
	// UsedShare is Used as a share of the quota, 0..1: keys rank by it.
	UsedShare float64 `json:"used_share"`
	// Limited: a request of the rule's cost would be refused now.
	Limited bool `json:"limited"`
}
