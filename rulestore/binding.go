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

// bindingField is one route binding field: its name, its Syntax and
// Default as docs/rulestore.md's "Route binding fields" table shows them
// (a test holds the two together), and how its value is read. The rule
// kinds' field tables (ratelimit/fields.go, ...) have the same shape.
type bindingField struct {
	name, syntax, def string
	parse             func(b *RouteBinding, f Fields, name, v string) error
}

// bindingFields are a route binding's fields, in the docs' order.
var bindingFields = []bindingField{
	{"rate_limit", "rule ids, comma-separated", "none", func(b *RouteBinding, f Fields, name, v string) error {
		// Commas only: "a b" is one bad id, as for a single rule.
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id == "" {
				continue
			}
			if err := ValidID(id); err != nil {
				return f.Errorf(name, "%v", err)
			}
			if slices.Contains(b.RateLimits, id) {
				return f.Errorf(name, "rule %q listed twice", id)
			}
			b.RateLimits = append(b.RateLimits, id)
		}
		if len(b.RateLimits) > 0 {
			b.RateLimit = b.RateLimits[0]
		}
		return nil
	}},
	{"circuit_breaker", "rule id", "none", func(b *RouteBinding, f Fields, name, v string) error {
		if v != "" {
			if err := ValidID(v); err != nil {
				return f.Errorf(name, "%v", err)
			}
		}
		b.CircuitBreaker = v
		return nil
	}},
	{"gray", "rule ids, comma- or space-separated, in order", "none", func(b *RouteBinding, f Fields, name, v string) error {
		for _, id := range splitIDs(v) {
			if err := ValidID(id); err != nil {
				return f.Errorf(name, "%v", err)
			}
			b.Gray = append(b.Gray, id)
		}
		return nil
	}},
}

// bindingFieldNames are the names of bindingFields.
func bindingFieldNames() []string {
	names := make([]string, len(bindingFields))
	for i, bf := range bindingFields {
		names[i] = bf.name
	}
	return names
}

func parseBinding(route string, f Fields) (any, error) {
	b := &RouteBinding{Route: route}
	for _, name := range f.Names() {
		i := slices.IndexFunc(bindingFields, func(bf bindingField) bool { return bf.name == name })
		if i < 0 {
			return nil, f.Errorf(name, "unknown field (want %s)", strings.Join(bindingFieldNames(), ", "))
		}
		if err := bindingFields[i].parse(b, f, name, strings.TrimSpace(f[name])); err != nil {
			return nil, err
		}
	}
	return b, nil
}
