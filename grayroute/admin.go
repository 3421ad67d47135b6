package grayroute

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicegw/sluice/rulestore"
)

func init() { rulestore.RegisterStateReporter("grayroute", reportState) }

// RuleSplit is one gray rule's decisions per version since the process
// started (the sluice_grayroute_requests_total counters).
type RuleSplit struct {
	// Rule is the deciding rule; "" counts requests no rule matched.
	Rule     string           `json:"rule"`
	Versions map[string]int64 `json:"versions"`
	// Random counts requests split at random because no hash key resolved.
	Random int64 `json:"random,omitempty"`
}

// reportState is grayroute's section of GET /sluice/state.
func reportState() any {
	initMetrics(nil)
	byRule := map[string]*RuleSplit{}
	get := func(rule string) *RuleSplit {
		if byRule[rule] == nil {
			byRule[rule] = &RuleSplit{Rule: rule, Versions: map[string]int64{}}
		}
		return byRule[rule]
	}
	collect(metrics.requests, func(l map[string]string, v float64) { get(l["rule"]).Versions[l["version"]] += int64(v) })
	collect(metrics.random, func(l map[string]string, v float64) { get(l["rule"]).Random += int64(v) })
	out := make([]*RuleSplit, 0, len(byRule))
	for _, s := range byRule {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return map[string]any{"rules": out, "analysis": analysisState()}
}

// collect reads every series of a counter vector.
func collect(c prometheus.Collector, fn func(labels map[string]string, v float64)) {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil || d.Counter == nil {
			continue
		}
		labels := map[string]string{}
		for _, lp := range d.Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		fn(labels, d.Counter.GetValue())
	}
}
