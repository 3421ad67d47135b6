package ratelimit

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// Several limits on one route: a handler with a list of rules (Rules and
// Inlines, or a route binding whose rate_limit lists several ids) admits a
// request only when every rule admits it (multi_serve.go). ruleList keeps
// the list and resolves, per request, the rules in force now.

// member is one rule in force with its limiter.
type member struct {
	rule *Rule
	lim  *limiter
}

// listed is one entry of a handler's list: a rule of the store (by its
// handle) or an inline rule.
type listed struct {
	id     string
	h      *rulestore.Handle // nil for an inline rule
	lim    *limiter
	inline *Rule
}

// ruleSet is what ruleList answered at one count of store changes; never
// changed once stored, so requests share it without a lock.
type ruleSet struct {
	changes uint64
	members []member // the rules present, in the list's order
	// missing: the first rule (or the route binding) missing, warned about
	// per request; its id is "" when none is.
	missingKind rulestore.Kind
	missing     string
	// unsupported says why the set cannot be decided as several limits (a
	// rule that shapes traffic among them); "" when it can.
	unsupported string
	// atomic: every rule counts exactly in Redis, so one script decides
	// them all (multi_cluster.go).
	atomic bool
	// policies is the RateLimit-Policy list when it is the same for every
	// request, else "" (setMultiHeaders).
	policies string
}

// ruleList is the rule list of a handler with Rules/Inlines or a Route.
type ruleList struct {
	app    *rulestore.App
	refuse bool     // on_missing_rule refuse
	fixed  []listed // Rules then Inlines; nil for a route
	route  string
	routeH *rulestore.Handle
	limFor func(id string) *limiter
	bound  atomic.Pointer[boundList] // the route binding's list, resolved
	held   atomic.Pointer[ruleSet]
}

// boundList is a route binding's rate_limit list as handles and limiters.
type boundList struct {
	b    *rulestore.RouteBinding
	list []listed
}

// current returns the rules in force, re-reading the handles only when
// the store changed since the last answer.
func (l *ruleList) current() *ruleSet {
	n := l.app.Changes() // before the handles: a change after this is re-read next time
	s := l.held.Load()
	if s == nil || s.changes != n {
		s = l.resolve(n)
		l.held.Store(s)
	}
	if s.missing != "" {
		if l.refuse {
			l.app.WarnMissingRefused(s.missingKind, s.missing)
		} else {
			l.app.WarnMissing(s.missingKind, s.missing)
		}
	}
	return s
}

// resolve reads the handles: the answer at count n of store changes.
func (l *ruleList) resolve(n uint64) *ruleSet {
	s := &ruleSet{changes: n}
	list := l.fixed
	if l.routeH != nil {
		var ok bool
		if list, ok = l.routeList(); !ok {
			s.missingKind, s.missing = rulestore.Binding, l.route
			return s
		}
	}
	for _, e := range list {
		r := e.inline
		if e.h != nil {
			if rr := e.h.Rule(); rr != nil {
				r = rr.Value.(*Rule)
			}
		}
		if r == nil {
			if s.missing == "" {
				s.missingKind, s.missing = rulestore.RateLimit, e.id
			}
			continue
		}
		s.members = append(s.members, member{rule: r, lim: e.lim})
	}
	if len(s.members) > 1 {
		s.policies = staticPolicies(s.members)
		s.atomic = true
		for _, m := range s.members {
			s.atomic = s.atomic && atomicFits(m.rule)
			if err := multiFits(m.rule); err != nil {
				s.unsupported = err.Error()
				break
			}
		}
	}
	return s
}

// routeList returns the route binding's list, or false when the binding
// is missing.
func (l *ruleList) routeList() ([]listed, bool) {
	rr := l.routeH.Rule()
	if rr == nil {
		return nil, false
	}
	b := rr.Value.(*rulestore.RouteBinding)
	if cur := l.bound.Load(); cur != nil && cur.b == b {
		return cur.list, true
	}
	next := &boundList{b: b, list: make([]listed, len(b.RateLimits))}
	for i, id := range b.RateLimits {
		next.list[i] = listed{id: id, h: l.app.Handle(rulestore.RateLimit, id), lim: l.limFor(id)}
		if len(b.RateLimits) > 1 {
			next.list[i].lim.listed.Store(true)
		}
	}
	l.bound.Store(next)
	return next.list, true
}

// listedRecheck is how long a cluster engine keeps refusing a key of a
// listed rule on what Redis said, at most: the time for the refunds of
// the requests that were refused by a later rule to land (one Redis round
// trip, a batch), after which the key is asked again.
const listedRecheck = int64(20 * time.Millisecond)

// multiFits fails a rule that cannot be one of several limits: one that
// shapes traffic (a paced or warming rate, an adaptive in-flight limit)
// holds a request or its state in ways a refund cannot undo.
func multiFits(r *Rule) error {
	if r.Flow.Behavior != Reject || r.Flow.Adaptive != nil {
		return fmt.Errorf("rate_limit rule %q shapes traffic (control_behavior %s or max_concurrent adaptive) and can only be a handler's one rule, not one of several limits", r.ID, r.Flow.Behavior)
	}
	return nil
}
