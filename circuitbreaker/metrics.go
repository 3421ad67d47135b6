package circuitbreaker

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/internal/metrickit"
)

// maxKeyMetrics bounds the per-key series of one rule; further keys of the
// rule are not exported (the default breaker and the first keys are).
const maxKeyMetrics = 100

// Metrics, one collector registered on every config's registry:
//
//	sluice_circuitbreaker_state{rule,key,state}       0/1, set on transitions
//	sluice_circuitbreaker_transitions_total{rule,to}  from the rule states
//	sluice_circuitbreaker_rejected_total{rule}        from the rule states
//	sluice_circuitbreaker_calls_total{rule,outcome}   from the rule states
//
// The counters are the rule states' own atomics, read at scrape time, so
// their series live exactly as long as the rule state (in shared).
var metrics = collector{state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "sluice", Subsystem: "circuitbreaker", Name: "state",
	Help: "1 for the state the breaker is in, 0 for the others: closed, open, half_open, forced_open, forced_closed, disabled.",
}, []string{"rule", "key", "state"})}

var (
	transitionsDesc = prometheus.NewDesc("sluice_circuitbreaker_transitions_total",
		"State changes, by the state entered.", []string{"rule", "to"}, nil)
	rejectedDesc = prometheus.NewDesc("sluice_circuitbreaker_rejected_total",
		"Requests refused because the breaker was open, its half-open probes were taken, or its ramp held them back.", []string{"rule"}, nil)
	callsDesc = prometheus.NewDesc("sluice_circuitbreaker_calls_total",
		"Calls admitted by the breaker, by outcome: success, failure, ignored (e.g. the client went away).", []string{"rule", "outcome"}, nil)
)

// outcomeNames are the calls_total outcome labels, by Outcome.
var outcomeNames = [...]string{Success: "success", Failure: "failure", Ignored: "ignored"}

type collector struct{ state *prometheus.GaugeVec }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	c.state.Describe(ch)
	ch <- transitionsDesc
	ch <- rejectedDesc
	ch <- callsDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.state.Collect(ch)
	shared.Range(func(_ string, st *ruleState) bool {
		m := st.metrics
		for s, name := range stateNames {
			ch <- m.transitions[s].Metric(transitionsDesc, m.id, name)
		}
		ch <- m.rejected.Metric(rejectedDesc, m.id)
		for o, name := range outcomeNames {
			ch <- m.calls[o].Metric(callsDesc, m.id, name)
		}
		return true
	})
}

// registerMetrics adds the collector to a config's registry.
func registerMetrics(reg *prometheus.Registry) error { return metrickit.Register(reg, metrics) }

// ruleMetrics are one rule's counts, which the request path adds to
// without label lookups, and its state series.
type ruleMetrics struct {
	id          string
	rejected    metrickit.Counter
	calls       [len(outcomeNames)]metrickit.Counter
	transitions [len(stateNames)]metrickit.Counter
	keys        atomic.Int64 // keyed series handed out so far
}

// newRuleMetrics starts a rule's series when the rule is first
// provisioned. Every series an alert may test with absent() exists from
// then on: the default breaker's state (closed until the rule is first
// applied), and the counters at 0, with a transitions series per state.
func newRuleMetrics(id string) *ruleMetrics {
	m := &ruleMetrics{id: id}
	m.setState("", StateClosed)
	return m
}

// exportKey reports whether a new key of the rule gets state series.
func (m *ruleMetrics) exportKey() bool { return m.keys.Add(1) <= maxKeyMetrics }

// setState sets the key's series of state s to 1 and its other states' to
// 0, so `state="open"` and `state="forced_open"` are separate series.
// Transitions are rare: the label lookups here are off the request path.
func (m *ruleMetrics) setState(key string, s State) {
	for i, name := range stateNames {
		v := 0.0
		if State(i) == s {
			v = 1
		}
		metrics.state.WithLabelValues(m.id, key, name).Set(v)
	}
}

func (m *ruleMetrics) transition(key string, exported bool, to State) {
	if int(to) < len(m.transitions) {
		m.transitions[to].Inc()
	}
	if exported {
		m.setState(key, to)
	}
}

// delete drops the rule's state series when no config uses it any more
// (its counters go with the rule state).
func (m *ruleMetrics) delete() {
	metrics.state.DeletePartialMatch(prometheus.Labels{"rule": m.id})
}
