package status

// Overview is what the status page's overview shows beyond /sluice/state
// (GET /sluice/ui/overview.json).
type Overview struct {
	// LiveInstances counts the Caddy instances following the same Redis and
	// prefix, from their heartbeats (1 without Redis).
	LiveInstances int `json:"live_instances"`
	// Propagation holds the totals of
	// sluice_rulestore_propagation_delay_seconds; the page shows the mean
	// delay of the changes applied between two polls.
	Propagation PropagationTotals `json:"propagation"`
	// Skipped lists the rule keys the last resync ignored because their
	// id is not valid (at most 100).
	Skipped []InvalidRule `json:"skipped"`
}

// PropagationTotals are a histogram's count and sum since the process started.
type PropagationTotals struct {
	// Count counts the rule changes whose propagation was measured.
	Count uint64 `json:"count"`
	// SumSeconds adds up their propagation times, in seconds.
	SumSeconds float64 `json:"sum_seconds"`
}
