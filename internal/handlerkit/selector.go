package handlerkit

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/rulestore"
)

// Selector finds, per request, the rule a handler's Rule or Route names now
// and the handler's state for it (T: a limiter, nothing for the breaker). A
// request reads store handles (two atomic loads while the store's layer is
// unchanged), never the store's maps.
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
}

type routed[T any] struct {
	id    string
	h     *rulestore.Handle
	state T
}

// NewSelector prepares the selection of b's Rule or Route (not Inline: a
// handler keeps its inline rule itself). stateFor gives the state for a
// rule id; pick reads the rule id of kind k off a route binding.
func NewSelector[V, T any, S rulestore.Spec](app *rulestore.App, k rulestore.Kind, b *Binding[S], pick func(*rulestore.RouteBinding) string, stateFor func(id string) T) *Selector[V, T] {
	s := &Selector[V, T]{app: app, kind: k, pick: pick, stateFor: stateFor}
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
// rule of this kind), and the request then passes.
func (s *Selector[V, T]) Current() (v V, st T, ok bool) {
	id, hd, st := s.id, s.rule, s.state
	if s.routeH != nil {
		br := s.routeH.Rule()
		if br == nil {
			s.app.WarnMissing(rulestore.Binding, s.route)
			return v, st, false
		}
		if id = s.pick(br.Value.(*rulestore.RouteBinding)); id == "" {
			return v, st, false
		}
		if c := s.routed.Load(); c != nil && c.id == id {
			hd, st = c.h, c.state
		} else {
			hd, st = s.app.Handle(s.kind, id), s.stateFor(id)
			s.routed.Store(&routed[T]{id: id, h: hd, state: st})
		}
	}
	rr := hd.Rule()
	if rr == nil {
		s.app.WarnMissing(s.kind, id)
		return v, st, false
	}
	return rr.Value.(V), st, true
}
