package ratelimit

import (
	"github.com/sluicegw/sluice/ratelimit/engine"
	"net/http"
	"strings"
)

// mostRestrictive picks the decision the headers and placeholders of a
// request decided by several rules report: the one whose refusal is
// nearest, i.e. with the fewest tokens remaining, ties going to the
// longest reset (the quota that takes longest to come back). Only
// decisions with quota information count, and with headersOnly only rules
// with headers on. It returns the index in ts, or -1 for none.
func mostRestrictive(ts []taken, headersOnly bool) int {
	best := -1
	var bestRem, bestReset int64
	for i := range ts {
		t := &ts[i]
		if !t.decided || !quotaKnown(&t.d) || (headersOnly && !t.m.rule.Headers) {
			continue
		}
		reset := t.d.Reset
		if !t.d.OK() && t.d.RetryAfter > reset {
			reset = t.d.RetryAfter
		}
		if best < 0 || t.d.Remaining < bestRem || (t.d.Remaining == bestRem && reset > bestReset) {
			best, bestRem, bestReset = i, t.d.Remaining, reset
		}
	}
	return best
}

// setMultiHeaders sets the rate limit headers of a request decided by
// several rules: RateLimit and X-RateLimit-* of the decision ts[k] (the
// most restrictive, or the refusing rule), and RateLimit-Policy listing the
// policy of every rule with headers on, in the list's order, as an RFC 9651
// list (`"a";q=20;w=1, "b";q=10000;w=86400`). static is that list when it
// is the same for every request (ruleSet.policies), else "".
func setMultiHeaders(hdr http.Header, ts []taken, k int, static string) {
	setHeaders(hdr, ts[k].m.rule, &ts[k].d)
	list := static
	if list == "" {
		list = policyList(ts)
	}
	if list != "" {
		// setHeaders' own slice for this response: no allocation.
		hdr["Ratelimit-Policy"][0] = list
	}
}

// policyList joins the policies of ts's rules with headers on, or "" for
// fewer than two.
func policyList(ts []taken) string {
	n, size := 0, 0
	for i := range ts {
		if ts[i].m.rule.Headers {
			n++
			size += len(ts[i].policy()) + 2
		}
	}
	if n < 2 {
		return ""
	}
	var b strings.Builder
	b.Grow(size)
	for i := range ts {
		if !ts[i].m.rule.Headers {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(ts[i].policy())
	}
	return b.String()
}

// staticPolicies is the RateLimit-Policy list of rules whose policies do
// not change per request (no calendar window, no override), or "".
func staticPolicies(ms []member) string {
	ts := make([]taken, len(ms))
	for i, m := range ms {
		if m.rule.Calendar != nil || len(m.rule.Overrides) > 0 {
			return ""
		}
		ts[i].m = m
	}
	return policyList(ts)
}

// policy is the rule's RateLimit-Policy item: of its decision when it was
// decided (the key's quota, the calendar window decided in), else of the
// rule's own quota now.
func (t *taken) policy() string {
	r := t.m.rule
	if t.decided {
		if t.d.Cal != nil {
			return calendarPolicy(r.ID, t.d.Limits, t.d.Cal)
		}
		return t.d.Limits.Policy
	}
	if r.Calendar != nil {
		return calendarPolicy(r.ID, &r.Limits, r.Calendar.Window(engine.Wall(t.m.lim.now())))
	}
	return r.Limits.Policy
}
