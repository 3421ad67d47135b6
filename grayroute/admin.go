package grayroute

import (
	"sort"

	"github.com/sluicegw/sluice/internal/metrickit"
	"github.com/sluicegw/sluice/rulestore"
)

func init() {
	rulestore.RegisterStateReporter("grayroute", reportState)
	rulestore.OnTick(pruneCounts)
}

// RuleSplit is one gray rule's decisions per version since the process
// started (the sluice_grayroute_requests_total counters).
type RuleSplit struct {
	// Rule is the deciding rule; "" counts requests no rule matched.
	Rule string `json:"rule"`
	// Versions counts the requests sent to each version.
	Versions map[string]int64 `json:"versions"`
	// Random counts requests split at random because no hash key resolved.
	Random int64 `json:"random,omitempty"`
}

// reportState is grayroute's section of GET /sluice/state.
func reportState() any {
	byRule := map[string]*RuleSplit{}
	get := func(rule string) *RuleSplit {
		if byRule[rule] == nil {
			byRule[rule] = &RuleSplit{Rule: rule, Versions: map[string]int64{}}
		}
		return byRule[rule]
	}
	metrics.requests.each(func(k [2]string, c *metrickit.Counter) { get(k[0]).Versions[k[1]] += int64(c.Load()) })
	metrics.random.each(func(k [2]string, c *metrickit.Counter) { get(k[0]).Random += int64(c.Load()) })
	out := make([]*RuleSplit, 0, len(byRule))
	for _, s := range byRule {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return map[string]any{"rules": out, "analysis": analysisState()}
}
