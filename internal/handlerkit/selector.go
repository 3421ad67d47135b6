package handlerkit

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/rulestore"
)

// Selector finds, per request, the rule a handler's Rule or Route names now
// and the handler's state for it (T: a limiter, nothing for the breaker).
// It keeps its last answer with the store's count of changes
// (rulestore.App.Changes): while the count stays the same a request reads
// that one counter, and after any change it re-reads the handles, never
// the store's maps.
type Selector[V, T any] struct {
	app   *rulestore.App
	kind  rulestore.Kind
	id    string            // Rule
	rule  *rulestore.Handle // Rule's handle; nil for a Route
	state T                 // Rule's state
	// For a Route: its name, handle, the field it names a rule by, and the
	// last rule it named with that rule's handle and state.
	route    string
	routeH   *rulestore.Handle
	pick     func(*rulestore.RouteBinding) string
	routed   atomic.Pointer[routed[T]]
	stateFor func(id string) T
	held     atomic.Pointer[held[V, T]]
	refuse   bool // on_missing_rule refuse
}

// held is what Current answered at one count of store changes; never
// changed once stored, so requests share it without a lock.
type held[V, T any] struct {
	changes uint64
	v       V
	st      T
	ok      bool
	// warn: a missing rule or binding, warned about on every request, as
	// without the cache (WarnMissing paces its own logging).
	warn     bool
	warnKind rulestore.Kind
	warnID   string
}

type routed[T any] struct {
	id    string
	h     *rulestore.Handle
	state T
}

// NewSelector prepares the selection of b's Rule or Route (not Inline: a
// handler keeps its inline rule itself). stateFor gives the state for a
// rule id; pick reads the rule id of kind k off a route binding.
func NewSelector[V, T any, S rulestore.Spec](app *rulestore.App, k rulestore.Kind, b *RuleSource[S], pick func(*rulestore.RouteBinding) string, stateFor func(id string) T) *Selector[V, T] {
	s := &Selector[V, T]{app: app, kind: k, pick: pick, stateFor: stateFor, refuse: b.Refuse()}
	if b.Route != "" {
		s.route, s.routeH = b.Route, app.Handle(rulestore.Binding, b.Route)
		return s
	}
	s.id, s.rule, s.state = b.Rule, app.Handle(k, b.Rule), stateFor(b.Rule)
	return s
}

// RuleID is the id of the rule in force as far as provisioning can tell:
// the Rule, or the rule the Route names now ("" if none).
func (s *Selector[V, T]) RuleID() string {
	if s.route == "" {
		return s.id
	}
	if b := s.app.Route(s.route); b != nil {
		return s.pick(b)
	}
	return ""
}

// Current returns the rule in force and its state; ok is false when there
// is none (a missing rule or route, warned about, or a route bound to no
// rule of this kind), and the request then passes, or, for a missing one
// under on_missing_rule refuse (see Refusal), is refused.
func (s *Selector[V, T]) Current() (v V, st T, ok bool) {
	n := s.app.Changes() // before the handles: a change after this is re-read next time
	c := s.held.Load()
	if c == nil || c.changes != n {
		c = s.resolve(n)
		s.held.Store(c)
	}
	if c.warn && s.refuse {
		s.app.WarnMissingRefused(c.warnKind, c.warnID)
	} else if c.warn {
		s.app.WarnMissing(c.warnKind, c.warnID)
	}
	return c.v, c.st, c.ok
}

// Refusal is the error (503) for a request Current found no rule for,
// when the rule (or route binding) is missing and on_missing_rule is
// refuse; nil when the request passes. s may be nil (an inline rule).
func (s *Selector[V, T]) Refusal(directive string) error {
	if s == nil || !s.refuse {
		return nil
	}
	if c := s.held.Load(); c != nil && c.warn {
		return RefuseMissing(directive, c.warnKind, c.warnID)
	}
	return nil
}

// resolve reads the handles: the answer at count n of store changes.
func (s *Selector[V, T]) resolve(n uint64) *held[V, T] {
	c := &held[V, T]{changes: n, st: s.state}
	id, hd := s.id, s.rule
	if s.routeH != nil {
		br := s.routeH.Rule()
		if br == nil {
			c.warn, c.warnKind, c.warnID = true, rulestore.Binding, s.route
			return c
		}
		if id = s.pick(br.Value.(*rulestore.RouteBinding)); id == "" {
			return c
		}
		if r := s.routed.Load(); r != nil && r.id == id {
			hd, c.st = r.h, r.state
		} else {
			hd, c.st = s.app.Handle(s.kind, id), s.stateFor(id)
			s.routed.Store(&routed[T]{id: id, h: hd, state: c.st})
		}
	}
	rr := hd.Rule()
	if rr == nil {
		c.warn, c.warnKind, c.warnID = true, s.kind, id
		return c
	}
	c.v, c.ok = rr.Value.(V), true
	return c
}
