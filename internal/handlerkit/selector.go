package handlerkit

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/rulestore"
)

// Selector finds, per request, the rule a handler's Rule or Route names now
// and the handler's state for it (T: a limiter, nothing for the breaker),
// kept ByChanges.
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
	held     ByChanges[held[V, T]]
	refuse   bool // on_missing_rule refuse
}

// held is what Current answers while the store does not change.
type held[V, T any] struct {
	v  V
	st T
	ok bool
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

// NewSelector prepares the selection of b's Rule or Route naming one rule
// (not Inline: a handler keeps its inline rule itself). stateFor gives the
// state for a rule id; pick reads the rule id of kind k off a route binding.
func NewSelector[V, T any, S rulestore.Spec](app *rulestore.App, k rulestore.Kind, b *Selection[S], pick func(*rulestore.RouteBinding) string, stateFor func(id string) T) *Selector[V, T] {
	s := &Selector[V, T]{app: app, kind: k, pick: pick, stateFor: stateFor, refuse: b.Refuse()}
	s.held.Init(app, s.resolve)
	if b.Route != "" {
		s.route, s.routeH = b.Route, app.UseHandle(rulestore.Binding, b.Route)
		return s
	}
	s.id, s.rule, s.state = b.Rule, app.UseHandle(k, b.Rule), stateFor(b.Rule)
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
	c := s.held.Get()
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
	if c := s.held.Last(); c != nil && c.warn {
		return RefuseMissing(directive, c.warnKind, c.warnID)
	}
	return nil
}

// resolve reads the handles: the answer until the store changes.
func (s *Selector[V, T]) resolve() held[V, T] {
	c := held[V, T]{st: s.state}
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
