package rulestore

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// RuleSet is one kind's rules of the rulestore app, by id, as the store
// keeps them (Redis-syntax Fields, so Go code may write a map of Fields).
// In JSON each rule is S, the kind's typed rule: that is what `caddy adapt`
// writes and what a JSON config is read as.
type RuleSet[S Spec] map[string]Fields

// MarshalJSON writes each rule typed.
func (r RuleSet[S]) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	out := make(map[string]Spec, len(r))
	for id, f := range r {
		s, err := SpecFromFields(specKind[S](), f)
		if err != nil {
			return nil, fmt.Errorf("%s rule %q: %w", specKind[S](), id, err)
		}
		out[id] = s
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads each rule typed (or with Redis-syntax strings),
// naming the rule in an error.
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
		s := newSpec[S]()
		if err := json.Unmarshal(v, s); err != nil {
			return fmt.Errorf("%s rule %q: %w", s.Kind(), id, err)
		}
		out[id] = SpecFields(s)
	}
	*r = out
	return nil
}

func newSpec[S Spec]() S { return reflect.New(reflect.TypeFor[S]().Elem()).Interface().(S) }

func specKind[S Spec]() Kind { return newSpec[S]().Kind() }

// Declared reports whether the app declares a static rule of kind k and id.
func (a *App) Declared(k Kind, id string) bool { return a.staticFields(k)[id] != nil }
