package ratelimit

import "net/http"

// report sets the request's placeholders and rate limit headers from its
// decisions: a refused request's by the rule that refused it, an admitted
// one's by the most restrictive rule (mostRestrictive). A handler's only
// rule reports its decision even without quota information, as a single
// rule always has: its key, and its quota unless an in-flight cap refused
// before the quota was consulted.
func (p *pass) report(hdr http.Header, ts []taken, kb []byte, refused int) {
	k, end := refused, refused
	if refused < 0 {
		k, end = mostRestrictive(ts, false), len(ts)
		if k < 0 && len(ts) == 1 && ts[0].decided {
			k = 0
		}
	}
	if k >= 0 {
		t := &ts[k]
		p.ph.rule = t.m.rule
		p.ph.setKey(t.key(kb))
		if quotaKnown(&t.d) || (len(ts) == 1 && quotaConsulted(&t.d)) {
			p.ph.limits, p.ph.remaining = t.d.Limits, t.d.Remaining
		}
	}
	hk := -1
	if refused >= 0 && quotaKnown(&ts[refused].d) {
		if ts[refused].m.rule.Headers {
			hk = refused
		}
	} else {
		// Refused without a quota (an in-flight cap): the headers are the
		// quotas the rules before it hold, refunded.
		hk = mostRestrictive(ts[:end], true)
	}
	if hk >= 0 {
		setMultiHeaders(hdr, ts, hk, p.policies)
	}
}

// admit counts an admitted request in each rule that admitted it and
// publishes its placeholders.
func (p *pass) admit(ts []taken) {
	for i := range ts {
		if ts[i].admitted {
			ts[i].m.lim.counters.allowed.Inc()
		}
	}
	p.ph.result = resultAllowed
	if p.shadowed {
		p.ph.result = resultShadowRejected
	}
	if p.ph.over != nil {
		p.ph.result = overResult(p.ph.over.Nest.OverLimit)
	}
	// A paced rule is always a handler's only one.
	if t := &ts[0]; t.admitted && t.d.Wait == 0 && t.d.Adaptive == nil {
		p.ph.paces = t.m.rule.Flow.Behavior.Paces()
	}
	p.ph.publish(p.pub)
}

// quotaConsulted reports whether d consulted the quota: not an in-flight
// refusal.
func quotaConsulted(d *Decision) bool {
	return d.Reason != TooManyInFlight && d.Reason != TooManyInFlightTotal
}

// quotaKnown reports whether d carries quota information for headers: not
// an in-flight refusal (the quota was not consulted) nor a decision made
// without Redis.
func quotaKnown(d *Decision) bool { return !d.Unknown && quotaConsulted(d) }
