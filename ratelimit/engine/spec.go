package engine

// Spec is what an engine decides a rule's requests by: the validated
// numbers of one rate_limit rule that the engines and the key table read.
// The handler's rule embeds it.
type Spec struct {
	Type LimitType
	// Limits for every key without an override.
	Limits Limits
	// Overrides by resolved key ("user:42", "tenant:acme:/api").
	Overrides map[string]*Limits
	// Cost of one request in tokens (requested_tokens, or cost as a
	// number).
	Cost int64
	// Settles: the cost is charged when the response is done
	// (count_status, response_cost); Reserve is what a request spends when
	// admitted, settled against its charge after.
	Reserve int64
	Settles bool
	// MaxConcurrent caps requests in flight per key; MaxConcurrentTotal
	// across all keys of the rule. 0 means no cap. InFlightOnly: the rule
	// has no rate (no qps), only these caps or the adaptive one.
	MaxConcurrent      int32
	MaxConcurrentTotal int64
	InFlightOnly       bool
	MaxKeys            int
	// Flow: pacing, warm-up and the adaptive in-flight limit.
	Flow Flow
	// Calendar is the period and zone of a calendar quota (limit_type
	// calendar); nil for the other types.
	Calendar *CalendarQuota
	// Idle is how long a key may go unseen before its state equals a fresh
	// one (a full bucket, an empty window), so expiring it loses nothing.
	Idle int64
}
