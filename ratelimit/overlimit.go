package ratelimit

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/ratelimit/overload"
)

// OverLimitHeader is the request header the upstream gets on a request a
// rule with over_limit tag or demote let through over its limit: the
// rule's id (one value per such rule).
const OverLimitHeader = "X-RateLimit-Over-Limit"

// demotedVar is the request variable that marks a request demoted by
// over_limit demote: every adaptive limit after it queues it as
// sheddable.
const demotedVar = "ratelimit.demoted"

// overLimit lets a request that t's rule refused for its rate through
// when the rule's over_limit is tag or demote: marked for the upstream
// (OverLimitHeader, {http.ratelimit.over_limit}), counted apart, and, for
// demote, at the lowest priority class. It reports whether it did; the
// rule then spent nothing, as a refusal.
func (p *pass) overLimit(r *http.Request, t *taken, kb []byte) bool {
	rule := t.m.rule
	if rule.Nest.OverLimit == OverRefuse || t.d.Reason != RateLimited {
		return false
	}
	r.Header.Add(OverLimitHeader, rule.ID)
	p.ph.over = rule
	if rule.Nest.OverLimit == OverDemote {
		caddyhttp.SetVar(r.Context(), demotedVar, true)
		t.m.lim.counters.demoted.Inc()
	} else {
		t.m.lim.counters.tagged.Inc()
	}
	if c := p.h.logger.Check(zap.DebugLevel, "over limit, let through"); c != nil {
		c.Write(zap.String("rule", rule.ID), zap.String("key", rule.shownKey(string(t.key(kb)))), zap.Stringer("over_limit", rule.Nest.OverLimit))
	}
	return true
}

// demoted reports whether an over_limit demote let r through.
func demoted(r *http.Request) bool {
	v, _ := caddyhttp.GetVar(r.Context(), demotedVar).(bool)
	return v
}

// overResult is {http.ratelimit.result} of a request let through over a
// limit.
func overResult(o OverLimit) result {
	if o == OverDemote {
		return resultDemoted
	}
	return resultTagged
}

// demote is class, or sheddable for a demoted request.
func demote(r *http.Request, class overload.Class) overload.Class {
	if demoted(r) {
		return overload.Sheddable
	}
	return class
}
