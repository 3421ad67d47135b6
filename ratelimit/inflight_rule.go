package ratelimit

import (
	"strings"

	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// A rule may cap requests in flight without a rate: max_concurrent (a
// number or adaptive) or max_concurrent_total alone, no qps. Its engine
// counts slots only (localEngine.slotsOnly), so its Limits are never
// consulted; they are set to the widest bucket only so that every number
// derived from them stays finite.

// rateFields shape a rate quota; a rule without one has nothing for them
// to shape.
var rateFields = []string{"burst", "window_size", "requested_tokens", "cost", "max_cost", "count_status",
	"response_cost", "reserve", "overrides", "on_redis_error", "redis_timeout", "lease_size",
	"control_behavior", "max_queue_wait", "max_queued", "warm_up_period", "cold_factor"}

// inFlightCapped reports whether the fields cap requests in flight: the
// one thing a rule without qps may do.
func inFlightCapped(get func(string) (string, bool)) bool {
	for _, name := range []string{"max_concurrent", "max_concurrent_total"} {
		if v, ok := get(name); ok && v != "0" {
			return true
		}
	}
	return false
}

// parseInFlightOnly makes r a rule that caps requests in flight only, or
// names the field that needs a rate.
func (r *Rule) parseInFlightOnly(f rulestore.Fields, get func(string) (string, bool)) error {
	const why = "applies to a rule with a rate (qps); this one only caps requests in flight"
	if r.Type != TokenBucket {
		return f.Errorf("qps", "required by limit_type %s", r.Type)
	}
	adaptive := false
	if v, ok := get("max_concurrent"); ok && isAdaptive(v) {
		adaptive = true
	}
	for _, name := range rateFields {
		if adaptive && (name == "max_queue_wait" || name == "max_queued") {
			continue // the adaptive limit's queue
		}
		if _, ok := get(name); ok {
			return f.Errorf(name, "%s", why)
		}
	}
	if v, ok := get("scope"); ok && strings.EqualFold(v, "cluster") {
		return f.Errorf("scope", "cluster shares a rate quota through Redis; in-flight caps are per instance (scope local)")
	}
	if v, ok := get("headers"); ok {
		if on, err := syntax.ParseBool(v); err == nil && on {
			return f.Errorf("headers", "the rate-limit headers describe a rate quota; this rule has none (qps)")
		}
	}
	r.InFlightOnly = true
	r.Headers = false
	r.Limits.QPS, r.Limits.Burst = MaxQPS, MaxBurst
	return nil
}
