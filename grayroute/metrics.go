package grayroute

import (
	"sync"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/internal/metrickit"
	"github.com/sluicegw/sluice/rulestore"
)

// The counts live for the process and one collector exports them on every
// config's registry, so they survive reloads and a reload never panics on
// a duplicate registration. Labels are bounded: rule ids and versions come
// from the configuration and Redis, never from the request, and a rule's
// counts go when the rule does (pruneCounts).
var metrics = struct {
	requests, random *counterVec
	pruned           prunedAt
	inline           inlineIDs
}{
	requests: newCounterVec(prometheus.NewDesc("sluice_grayroute_requests_total",
		"Requests routed by grayroute, by deciding rule (empty: no rule matched) and version.", []string{"rule", "version"}, nil), 2),
	random: newCounterVec(prometheus.NewDesc("sluice_grayroute_random_assignments_total",
		"Requests split at random because no hash key resolved, by rule.", []string{"rule"}, nil), 1),
}

// registerMetrics registers the collectors on a config's registry.
func registerMetrics(reg *prometheus.Registry) error {
	return metrickit.Register(reg, metrics.requests, metrics.random, canaryStates{})
}

// counterVec is a set of counts by up to two label values, exported as one
// metric and read directly by the state endpoint. A count, once made,
// stays for the process.
type counterVec struct {
	desc   *prometheus.Desc
	labels int // label values per count: 1 or 2
	mu     sync.RWMutex
	m      map[[2]string]*metrickit.Counter
}

func newCounterVec(d *prometheus.Desc, labels int) *counterVec {
	return &counterVec{desc: d, labels: labels, m: map[[2]string]*metrickit.Counter{}}
}

// WithLabelValues returns the count of the label values, making it at 0.
func (v *counterVec) WithLabelValues(values ...string) *metrickit.Counter {
	var k [2]string
	copy(k[:], values)
	v.mu.RLock()
	c := v.m[k]
	v.mu.RUnlock()
	if c != nil {
		return c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c = v.m[k]; c == nil {
		c = new(metrickit.Counter)
		v.m[k] = c
	}
	return c
}

// retain drops the counts whose label values keep refuses.
func (v *counterVec) retain(keep func(k [2]string) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k := range v.m {
		if !keep(k) {
			delete(v.m, k)
		}
	}
}

// each calls fn with every count and its label values.
func (v *counterVec) each(fn func(k [2]string, c *metrickit.Counter)) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for k, c := range v.m {
		fn(k, c)
	}
}

func (v *counterVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

func (v *counterVec) Collect(ch chan<- prometheus.Metric) {
	v.each(func(k [2]string, c *metrickit.Counter) {
		ch <- c.Metric(v.desc, k[:v.labels]...)
	})
}

// ruleCounters caches one rule's two counts so the request path does not
// look up label values.
type ruleCounters struct {
	target, fallback *metrickit.Counter
	fallbackVersion  string
}

func (g *Rule) countersFor(fallback string) *ruleCounters {
	if c := g.counters.Load(); c != nil && c.fallbackVersion == fallback {
		return c
	}
	c := &ruleCounters{
		target:          metrics.requests.WithLabelValues(g.ID, g.Target),
		fallback:        metrics.requests.WithLabelValues(g.ID, fallback),
		fallbackVersion: fallback,
	}
	g.counters.Store(c)
	return c
}

// prunedAt is the store state the counts were last pruned for (weak: an
// unloaded config's app is not kept alive by it).
type prunedAt struct {
	mu      sync.Mutex
	app     weak.Pointer[rulestore.App]
	changes uint64
}

// pruneCounts drops the counts of gray rules no longer in force, so rule
// ids that come and go in Redis leave no series and no memory behind. It
// runs on the store's tick, only when the store changed since its last
// run. A rule that returns starts its counts from zero (a counter reset,
// which Prometheus's rate() handles). The versions of a rule in force are
// kept: they change with its releases, not with each request.
func pruneCounts(time.Time) {
	a := rulestore.Active()
	if a == nil {
		return
	}
	p := &metrics.pruned
	p.mu.Lock()
	defer p.mu.Unlock()
	changes := a.Changes()
	if p.app.Value() == a && p.changes == changes {
		return
	}
	p.app, p.changes = weak.Make(a), changes
	live := a.Rules(rulestore.Gray)
	keep := func(k [2]string) bool { return k[0] == "" || live[k[0]] != nil || metrics.inline.held(k[0]) }
	metrics.requests.retain(keep)
	metrics.random.retain(keep)
}

// inlineIDs counts, per inline gray rule id, the handlers that declare
// it: the store never holds inline rules, so pruneCounts keeps their
// counts by this. A rule caches its counters (countersFor), so a count
// pruned while its rule is in use would never be exported again.
type inlineIDs struct {
	mu sync.Mutex
	n  map[string]int
}

// hold notes one more handler declaring each of ids.
func (s *inlineIDs) hold(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	for _, id := range ids {
		s.n[id]++
	}
}

// release undoes hold.
func (s *inlineIDs) release(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if s.n[id]--; s.n[id] <= 0 {
			delete(s.n, id)
		}
	}
}

func (s *inlineIDs) held(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[id] > 0
}
