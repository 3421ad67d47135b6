package rulestore

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// RuleSet is one kind's rules of the rulestore app, by id.
type RuleSet[S Spec] map[string]S

// UnmarshalJSON reads each rule, naming the rule in an error.
func (r *RuleSet[S]) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*r = nil
		return nil
	}
	out := make(RuleSet[S], len(raw))
	for id, v := range raw {
		s := reflect.New(reflect.TypeFor[S]().Elem()).Interface().(S)
		if err := json.Unmarshal(v, s); err != nil {
			return fmt.Errorf("%s rule %q: %w", s.Kind(), id, err)
		}
		out[id] = s
	}
	*r = out
	return nil
}

// fields converts the rules to the store's Fields.
func (r RuleSet[S]) fields() map[string]Fields {
	if r == nil {
		return nil
	}
	m := make(map[string]Fields, len(r))
	for id, s := range r {
		m[id] = SpecFields(s)
	}
	return m
}

// Declare adds a static rule given by its Redis fields (what the
// Caddyfile's rulestore block does), replacing one of the same id. The
// fields are validated when the app is provisioned.
func (a *App) Declare(k Kind, id string, f Fields) error {
	s, err := SpecFromFields(k, f)
	if err != nil {
		return err
	}
	switch s := s.(type) {
	case *RateLimitSpec:
		a.RateLimit = declare(a.RateLimit, id, s)
	case *CircuitBreakerSpec:
		a.CircuitBreaker = declare(a.CircuitBreaker, id, s)
	case *GraySpec:
		a.Gray = declare(a.Gray, id, s)
	case *BindingSpec:
		a.Binding = declare(a.Binding, id, s)
	}
	return nil
}

func declare[S Spec](r RuleSet[S], id string, s S) RuleSet[S] {
	if r == nil {
		r = RuleSet[S]{}
	}
	r[id] = s
	return r
}

// Declared reports whether the app declares a static rule of kind k and id.
func (a *App) Declared(k Kind, id string) bool { return a.staticFields(k)[id] != nil }
