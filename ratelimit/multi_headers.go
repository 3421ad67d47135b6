package ratelimit

import (
	"net/http"
	"strings"

	"github.com/sluicegw/sluice/ratelimit/answer"
	"github.com/sluicegw/sluice/ratelimit/engine"
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
// several rules: X-RateLimit-* of the decision ts[k] (the most
// restrictive, or the refusing rule), RateLimit-Policy listing the policy
// of every rule with headers on, in the list's order, as an RFC 9651 list
// (`"a";q=20;w=1, "b";q=10000;w=86400`), and RateLimit listing what is left
// of each rule that decided the request, in the same order, so a client
// sees every quota, whatever its unit. static is the policy list when it
// is the same for every request (ruleSet.policies), else "". A list of
// one rule gets that rule's headers (answer.Set).
func setMultiHeaders(hdr http.Header, ts []taken, k int, static string) {
	answer.Set(hdr, ts[k].m.rule.ID, &ts[k].d)
	if len(ts) == 1 {
		return // a handler's only rule: its own headers
	}
	list := static
	if list == "" {
		list = policyList(ts)
	}
	// answer.Set's own slices for this response: no allocation.
	if list != "" {
		hdr["Ratelimit-Policy"][0] = list
	}
	if left := remainingList(ts); left != "" {
		hdr["Ratelimit"][0] = left
	}
}

// remainingList joins the RateLimit items of ts's rules with headers on
// that decided the request with quota information, or "" for fewer than
// two.
func remainingList(ts []taken) string {
	n := 0
	for i := range ts {
		if reports(&ts[i]) {
			n++
		}
	}
	if n < 2 {
		return ""
	}
	b := make([]byte, 0, 40*n)
	for i := range ts {
		t := &ts[i]
		if !reports(t) {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = answer.AppendRemaining(b, t.m.rule.ID, &t.d)
	}
	return string(b)
}

func reports(t *taken) bool {
	return t.decided && t.m.rule.Headers && quotaKnown(&t.d)
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
// decided with quota information (the key's quota, the calendar window
// decided in), else of the rule's own quota now (a calendar quota refused
// by its in-flight cap never reached a window).
func (t *taken) policy() string {
	r := t.m.rule
	switch {
	case t.decided && t.d.Cal != nil:
		return answer.CalendarPolicy(r.ID, t.d.Limits, t.d.Cal)
	case r.Calendar != nil:
		return answer.CalendarPolicy(r.ID, &r.Limits, r.Calendar.Window(engine.Wall(t.m.lim.now())))
	case t.decided && t.d.Limits != nil:
		return t.d.Limits.Policy
	}
	return r.Limits.Policy
}
