package rulestore

import (
	"slices"
	"strings"
)

// RouteBinding names the rules that apply to a route: the hash
// gateway:binding:<route> with fields rate_limit (one rate_limit rule id,
// or a comma-separated list of them: several limits, all of which must
// admit a request), circuit_breaker and gray (an ordered, comma-separated
// list of gray rule ids).
type RouteBinding struct {
	Route string
	// RateLimit is the first of RateLimits ("" without one), for callers
	// that apply one rule.
	RateLimit      string
	RateLimits     []string
	CircuitBreaker string
	Gray           []string
}

// splitIDs splits a comma (or space) separated list of rule ids.
func splitIDs(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
}

func parseBinding(route string, f Fields) (any, error) {
	b := &RouteBinding{Route: route}
	for _, name := range f.Names() {
		v := strings.TrimSpace(f[name])
		switch name {
		case "circuit_breaker":
			if v != "" {
				if err := ValidID(v); err != nil {
					return nil, f.Errorf(name, "%v", err)
				}
			}
			b.CircuitBreaker = v
		case "rate_limit":
			// Commas only: "a b" is one bad id, as for a single rule.
			for _, id := range strings.Split(v, ",") {
				if id = strings.TrimSpace(id); id == "" {
					continue
				}
				if err := ValidID(id); err != nil {
					return nil, f.Errorf(name, "%v", err)
				}
				if slices.Contains(b.RateLimits, id) {
					return nil, f.Errorf(name, "rule %q listed twice", id)
				}
				b.RateLimits = append(b.RateLimits, id)
			}
			if len(b.RateLimits) > 0 {
				b.RateLimit = b.RateLimits[0]
			}
		case "gray":
			for _, id := range splitIDs(v) {
				if err := ValidID(id); err != nil {
					return nil, f.Errorf(name, "%v", err)
				}
				b.Gray = append(b.Gray, id)
			}
		default:
			return nil, f.Errorf(name, "unknown field (want rate_limit, circuit_breaker, gray)")
		}
	}
	return b, nil
}
