package handlerkit

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/rulestore"
)

// RuleList finds, per request, the rules a handler's list names now: its
// fixed entries (Rules and Inlines) or the list a route binding names, each
// with the handler's state for it (T), as the handler's own view X of them
// (derive), kept ByChanges. ratelimit decides every rule of it, grayroute
// the first that matches.
type RuleList[V comparable, T, X any] struct {
	app      *rulestore.App
	kind     rulestore.Kind
	fixed    []Entry[V, T] // nil for a route
	route    string
	routeH   *rulestore.Handle
	pick     func(*rulestore.RouteBinding) []string
	stateFor func(id string) T
	derive   func(*Resolved[V, T]) X
	bound    atomic.Pointer[boundEntries[V, T]] // the binding's list, resolved
	held     ByChanges[X]
}

// Entry is one rule of a list: the store's rule of its id (Handle), an
// inline rule, or both, the store's replacing the inline one while it
// exists (grayroute); with its state.
type Entry[V comparable, T any] struct {
	ID     string
	Handle *rulestore.Handle // nil: the inline rule only
	Inline V                 // the zero V: none
	State  T
}

// boundEntries is a route binding's list as entries.
type boundEntries[V comparable, T any] struct {
	b    *rulestore.RouteBinding
	list []Entry[V, T]
}

// Resolved is a list as the store holds it now.
type Resolved[V comparable, T any] struct {
	// Members are the list's entries in order; Rule is the zero V for a
	// rule missing now.
	Members []Member[V, T]
	// MissingKind and Missing name the route binding, if it is missing,
	// else the first rule missing; Missing is "" when none is.
	MissingKind rulestore.Kind
	Missing     string
}

// Member is one entry as resolved.
type Member[V comparable, T any] struct {
	ID    string
	Rule  V
	State T
}

// NewRuleList prepares the list of fixed entries, or, with route, of the
// rules of kind k the binding names (pick), each made an entry with
// stateFor's state. derive makes the handler's view of the resolved list.
func NewRuleList[V comparable, T, X any](app *rulestore.App, k rulestore.Kind, fixed []Entry[V, T], route string,
	pick func(*rulestore.RouteBinding) []string, stateFor func(id string) T, derive func(*Resolved[V, T]) X) *RuleList[V, T, X] {
	l := &RuleList[V, T, X]{app: app, kind: k, fixed: fixed, route: route, pick: pick, stateFor: stateFor, derive: derive}
	if route != "" {
		l.routeH = app.UseHandle(rulestore.Binding, route)
	}
	l.held.Init(app, l.resolve)
	return l
}

// Current returns the handler's view of the rules in force, worked out
// again only when the store changed since the last answer.
func (l *RuleList[V, T, X]) Current() *X { return l.held.Get() }

// resolve reads the handles: the list until the store changes.
func (l *RuleList[V, T, X]) resolve() X {
	var zero V
	s := &Resolved[V, T]{}
	list := l.fixed
	if l.routeH != nil {
		var ok bool
		if list, ok = l.routeList(); !ok {
			s.MissingKind, s.Missing = rulestore.Binding, l.route
		}
	}
	s.Members = make([]Member[V, T], len(list))
	for i, e := range list {
		r := e.Inline
		if e.Handle != nil {
			if rr := e.Handle.Rule(); rr != nil {
				r = rr.Value.(V)
			}
		}
		if r == zero && s.Missing == "" {
			s.MissingKind, s.Missing = l.kind, e.ID
		}
		s.Members[i] = Member[V, T]{ID: e.ID, Rule: r, State: e.State}
	}
	return l.derive(s)
}

// routeList returns the route binding's list, or false when the binding
// is missing.
func (l *RuleList[V, T, X]) routeList() ([]Entry[V, T], bool) {
	rr := l.routeH.Rule()
	if rr == nil {
		return nil, false
	}
	b := rr.Value.(*rulestore.RouteBinding)
	if cur := l.bound.Load(); cur != nil && cur.b == b {
		return cur.list, true
	}
	ids := l.pick(b)
	next := &boundEntries[V, T]{b: b, list: make([]Entry[V, T], len(ids))}
	for i, id := range ids {
		next.list[i] = Entry[V, T]{ID: id, Handle: l.app.Handle(l.kind, id), State: l.stateFor(id)}
	}
	l.bound.Store(next)
	return next.list, true
}
