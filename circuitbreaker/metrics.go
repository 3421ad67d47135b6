package circuitbreaker

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// maxKeyMetrics bounds the per-key series of one rule; further keys of the
// rule are not exported (the default breaker and the first keys are).
const maxKeyMetrics = 100

var metrics = struct {
	once        sync.Once
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	rejected    *prometheus.CounterVec
	calls       *prometheus.CounterVec
}{}

func initMetrics() {
	metrics.once.Do(func() {
		const ns, sub = "sluice", "circuitbreaker"
		metrics.state = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "state",
			Help: "1 for the state the breaker is in, 0 for the others: closed, open, half_open, forced_open, forced_closed, disabled.",
		}, []string{"rule", "key", "state"})
		metrics.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "transitions_total",
			Help: "State changes, by the state entered.",
		}, []string{"rule", "to"})
		metrics.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "rejected_total",
			Help: "Requests refused because the breaker was open, its half-open probes were taken, or its ramp held them back.",
		}, []string{"rule"})
		metrics.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "calls_total",
			Help: "Calls admitted by the breaker, by outcome: success, failure, ignored (e.g. the client went away).",
		}, []string{"rule", "outcome"})
	})
}

// registerMetrics adds the collectors to a config's registry; a second
// registration (another handler, or a reload on the same registry) is fine.
func registerMetrics(reg *prometheus.Registry) error {
	initMetrics()
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{metrics.state, metrics.transitions, metrics.rejected, metrics.calls} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// ruleMetrics are one rule's series, resolved once so the request path
// does no label lookups.
type ruleMetrics struct {
	id       string
	rejected prometheus.Counter
	calls    [3]prometheus.Counter // by Outcome
	keys     atomic.Int64          // keyed series handed out so far
}

// newRuleMetrics resolves a rule's series when the rule is first
// provisioned. Every series an alert may test with absent() exists from
// then on: the default breaker's state (closed until the rule is first
// applied), and the counters at 0, with a transitions series per state.
func newRuleMetrics(id string) *ruleMetrics {
	initMetrics()
	m := &ruleMetrics{id: id, rejected: metrics.rejected.WithLabelValues(id)}
	for o, name := range [...]string{Success: "success", Failure: "failure", Ignored: "ignored"} {
		m.calls[o] = metrics.calls.WithLabelValues(id, name)
	}
	for _, name := range stateNames {
		metrics.transitions.WithLabelValues(id, name)
	}
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
	metrics.transitions.WithLabelValues(m.id, to.String()).Inc()
	if exported {
		m.setState(key, to)
	}
}

// delete drops the rule's series when no config uses it any more.
func (m *ruleMetrics) delete() {
	metrics.state.DeletePartialMatch(prometheus.Labels{"rule": m.id})
	metrics.transitions.DeletePartialMatch(prometheus.Labels{"rule": m.id})
	metrics.rejected.DeleteLabelValues(m.id)
	metrics.calls.DeletePartialMatch(prometheus.Labels{"rule": m.id})
}
