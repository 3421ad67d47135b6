package grayroute

import "github.com/prometheus/client_golang/prometheus"

// canaryStateDesc is sluice_grayroute_canary_state{rule,state}: 1 for the
// state the canary is in (the rule's `state` field in force), 0 for the
// others, for every canary this process analyses. Read at scrape time from
// the canaries and the rules in force, so a rollback written by any
// instance or by the canary commands shows on every instance.
var canaryStateDesc = prometheus.NewDesc("sluice_grayroute_canary_state",
	"1 for the state a canary under analysis is in, 0 for the others: running, paused, rolled_back, promoted.",
	[]string{"rule", "state"}, nil)

// canaryStates exports canaryStateDesc.
type canaryStates struct{}

func (canaryStates) Describe(ch chan<- *prometheus.Desc) { ch <- canaryStateDesc }

func (canaryStates) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	for _, c := range analysisState() {
		if seen[c.Rule] {
			continue // the same rule in several configs' hubs
		}
		seen[c.Rule] = true
		for _, name := range stateNames {
			v := 0.0
			if name == c.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(canaryStateDesc, prometheus.GaugeValue, v, c.Rule, name)
		}
	}
}
