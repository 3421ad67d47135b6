package rulestore

import (
	"encoding/json"
	"fmt"
	"strings"
)

// KindRules are static rules of any registered kind, by kind name, then id,
// as the store keeps them (Redis-syntax Fields). In JSON each rule is its
// kind's Spec, as in a RuleSet.
type KindRules map[string]map[string]Fields

// MarshalJSON writes each rule typed.
func (r KindRules) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	out := make(map[string]map[string]Spec, len(r))
	for name, rules := range r {
		k, err := registeredKind(name)
		if err != nil {
			return nil, err
		}
		out[name] = make(map[string]Spec, len(rules))
		for id, f := range rules {
			s, err := SpecFromFields(k, f)
			if err != nil {
				return nil, fmt.Errorf("%s rule %q: %w", k, id, err)
			}
			out[name][id] = s
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads each rule typed by its kind (or with Redis-syntax
// strings), naming the kind and rule in an error.
func (r *KindRules) UnmarshalJSON(b []byte) error {
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*r = nil
		return nil
	}
	out := make(KindRules, len(raw))
	for name, rules := range raw {
		k, err := registeredKind(name)
		if err != nil {
			return err
		}
		if typedRuleSet(new(App), k) != nil { // one place in the config per rule
			return fmt.Errorf("%s rules go in the rulestore app's %s field, not in rules", name, name)
		}
		out[name] = make(map[string]Fields, len(rules))
		for id, v := range rules {
			s, _ := NewSpec(k)
			if err := decodeSpec(s, v); err != nil {
				return fmt.Errorf("%s rule %q: %w", k, id, err)
			}
			out[name][id] = SpecFields(s)
		}
	}
	*r = out
	return nil
}

func registeredKind(name string) (Kind, error) {
	k, ok := ParseKind(name)
	if !ok {
		known := kindNames()
		return 0, fmt.Errorf("unknown rule kind %q%s (known: %s; a kind comes with the module that registers it)",
			name, DidYouMean(name, known...), strings.Join(known, ", "))
	}
	return k, nil
}

// typedRuleSet is the App's own field for kind k's static rules, or nil
// for a kind declared in OtherKinds.
func typedRuleSet(a *App, k Kind) *map[string]Fields {
	sets := map[Kind]*map[string]Fields{
		RateLimit:      (*map[string]Fields)(&a.RateLimit),
		CircuitBreaker: (*map[string]Fields)(&a.CircuitBreaker),
		Gray:           (*map[string]Fields)(&a.Gray),
		Binding:        (*map[string]Fields)(&a.Binding),
	}
	return sets[k]
}

// staticFields are the static rules of kind k the config declares.
func (a *App) staticFields(k Kind) map[string]Fields {
	if set := typedRuleSet(a, k); set != nil {
		return *set
	}
	return a.OtherKinds[k.String()]
}

// Declare adds a static rule given by its Redis fields (what the
// Caddyfile's rulestore block does), replacing one of the same id. An
// unknown field or a value of the wrong type is an error; the rule itself
// is validated when the app is provisioned.
func (a *App) Declare(k Kind, id string, f Fields) error {
	if _, err := SpecFromFields(k, f); err != nil {
		return err
	}
	if set := typedRuleSet(a, k); set != nil {
		if *set == nil {
			*set = map[string]Fields{}
		}
		(*set)[id] = f
		return nil
	}
	name := k.String()
	if a.OtherKinds == nil {
		a.OtherKinds = KindRules{}
	}
	if a.OtherKinds[name] == nil {
		a.OtherKinds[name] = map[string]Fields{}
	}
	a.OtherKinds[name][id] = f
	return nil
}
