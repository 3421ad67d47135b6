package grayroute

import (
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// What /sluice/state and the events show of the analysis.

// IntervalReport is one interval's verdict with its numbers, as
// /sluice/state and the gray_analysis event show it.
type IntervalReport struct {
	// Interval is the interval's number on the wall clock (Unix time over
	// the interval's length).
	Interval int64 `json:"interval"`
	// At is when it was judged.
	At time.Time `json:"at"`
	// Outcome is inconclusive, healthy or failing.
	Outcome string `json:"outcome"`
	// Action is hold, advance, promote or rollback.
	Action string `json:"action"`
	// Weight is the canary's weight, in percent, the counts were taken at.
	Weight float64 `json:"weight"`
	// NewWeight is its weight after the action, in percent.
	NewWeight float64 `json:"new_weight"`
	// Written: this instance wrote the action into the rule.
	Written bool `json:"written"`
	// Scope is fleet (the totals of every instance, from Redis) or local
	// (this instance's counts, without Redis).
	Scope string `json:"scope"`
	// Reason explains the outcome in a sentence.
	Reason string `json:"reason"`
	// Instances is how many instances' counts the fleet's totals hold,
	// and MissingReports how many live instances had not reported this
	// interval when its counts were taken (their counts join a later
	// interval). Both 0 without Redis.
	Instances      int `json:"instances"`
	MissingReports int `json:"missing_reports"`
	// Verdict holds the numbers behind the outcome.
	Verdict
}

// CanaryReport is one canary's part of /sluice/state.
type CanaryReport struct {
	// Rule is the gray rule's id.
	Rule string `json:"rule"`
	// Target is the canary's version.
	Target string `json:"target"`
	// Fallback is the baseline's version.
	Fallback string `json:"fallback"`
	// State is running, paused, rolled_back or promoted.
	State string `json:"state"`
	// Weight is the canary's share of the rule's requests, in percent.
	Weight float64 `json:"weight"`
	// MissedWrites counts this instance's writes of its counts to Redis
	// that failed (each is tried again until it lands or a later write
	// replaces it).
	MissedWrites uint64 `json:"missed_writes"`
	// Intervals are the last judged intervals (at most 60), oldest first.
	Intervals []IntervalReport `json:"intervals"`
}

// analysisState lists every canary this process analyses.
func analysisState() []CanaryReport {
	out := []CanaryReport{}
	analysisPool.Range(func(_, v any) bool {
		h, ok := v.(*analysisHub)
		if !ok {
			return true
		}
		store := h.store.Load()
		h.canaries.Range(func(_, v any) bool {
			c := v.(*canary)
			c.mu.Lock()
			rep := CanaryReport{Rule: c.rule, Target: c.target, Fallback: c.fallback,
				State: c.state.String(), Weight: percent(c.weight), MissedWrites: c.missedWrites, Intervals: append([]IntervalReport(nil), c.history...)}
			c.mu.Unlock()
			// The rule in force now, not as the hub last saw it.
			if r := store.Lookup(rulestore.Gray, c.rule); r != nil {
				if g, ok := r.Value.(*Rule); ok && g.Target == c.target && g.Fallback == c.fallback {
					rep.State, rep.Weight = g.State.String(), percent(g.Weight)
				}
			}
			out = append(out, rep)
			return true
		})
		return true
	})
	return out
}
