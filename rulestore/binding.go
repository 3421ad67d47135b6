package rulestore

import "strings"

// RouteBinding names the rules that apply to a route: the hash
// gateway:binding:<route> with fields rate_limit, circuit_breaker and gray
// (an ordered, comma-separated list of gray rule ids).
type RouteBinding struct {
	Route          string
	RateLimit      string
	CircuitBreaker string
	Gray           []string
}

func parseBinding(route string, f Fields) (any, error) {
	b := &RouteBinding{Route: route}
	for _, name := range f.Names() {
		v := strings.TrimSpace(f[name])
		switch name {
		case "rate_limit", "circuit_breaker":
			if v != "" {
				if err := ValidID(v); err != nil {
					return nil, f.Errorf(name, "%v", err)
				}
			}
			if name == "rate_limit" {
				b.RateLimit = v
			} else {
				b.CircuitBreaker = v
			}
		case "gray":
			for _, id := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
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
