package ratelimit

import (
	"fmt"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// Several limits on one route: a handler with a list of rules (Rules and
// Inlines, or a route binding whose rate_limit lists several ids) admits a
// request only when every rule admits it (pipeline.go). ruleList keeps
// the list and resolves, per request, the rules in force now.

// member is one rule in force with its limiter.
type member struct {
	rule *Rule
	lim  *limiter
}

// ruleSet is the handler's view of its rule list at one count of store
// changes; never changed once made, so requests share it without a lock.
type ruleSet struct {
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

// ruleList is the rule list of a handler with Rules/Inlines or a Route,
// resolved by handlerkit.RuleList.
type ruleList struct {
	*handlerkit.RuleList[*Rule, *limiter, ruleSet]
	app    *rulestore.App
	refuse bool // on_missing_rule refuse
}

// current returns the rules in force, warning about a missing one.
func (l *ruleList) current() *ruleSet {
	s := l.Current()
	if s.missing != "" {
		if l.refuse {
			l.app.WarnMissingRefused(s.missingKind, s.missing)
		} else {
			l.app.WarnMissing(s.missingKind, s.missing)
		}
	}
	return s
}

// setOf is the resolved list as the handler decides it: the rules present,
// marked as listed when there are several.
func setOf(res *handlerkit.Resolved[*Rule, *limiter]) ruleSet {
	s := ruleSet{missingKind: res.MissingKind, missing: res.Missing}
	for _, m := range res.Members {
		if len(res.Members) > 1 {
			m.State.listed.Store(true)
		}
		if m.Rule != nil {
			s.members = append(s.members, member{rule: m.Rule, lim: m.State})
		}
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

// multiFits fails a rule that cannot be one of several limits: one that
// shapes traffic (a paced or warming rate, an adaptive in-flight limit)
// holds a request or its state in ways a refund cannot undo.
func multiFits(r *Rule) error {
	if r.Flow.Behavior != Reject || r.Flow.Adaptive != nil {
		return fmt.Errorf("rate_limit rule %q shapes traffic (control_behavior %s or max_concurrent adaptive) and can only be a handler's one rule, not one of several limits", r.ID, r.Flow.Behavior)
	}
	return nil
}
