package handlerkit

import (
	"fmt"

	"github.com/sluicegw/sluice/rulestore"
)

// ListRef is one entry of a rule list: an id, with fields when inline.
type ListRef struct {
	ID     string
	Inline rulestore.Fields
}

// ValidateList checks a JSON rule list as ListDirective's parser does: a
// route or rules, not both, each rule well formed and listed once.
func ValidateList(k rulestore.Kind, route string, refs []ListRef) error {
	if route != "" && len(refs) > 0 {
		return fmt.Errorf("give either a route or rules, not both")
	}
	if route == "" && len(refs) == 0 {
		return fmt.Errorf("no %s rules: give rule ids, inline rules or a route", k)
	}
	seen := map[string]bool{}
	for _, r := range refs {
		if err := rulestore.ValidID(r.ID); err != nil {
			return err
		}
		if seen[r.ID] {
			return fmt.Errorf("%s rule %q listed twice", k, r.ID)
		}
		seen[r.ID] = true
	}
	return nil
}

// ProvisionList checks a rule list when provisioned: a named rule must exist
// (or can come from Redis); an inline rule must parse as kind k and not also
// be a rule of the rulestore block (the two would share an id while being
// different rules); a route's binding, and the rules it lists now (pick),
// must exist. It returns the inline rules parsed, parallel to refs (nil for
// a named rule).
func ProvisionList(app *rulestore.App, k rulestore.Kind, refs []ListRef, route string, pick func(*rulestore.RouteBinding) []string) ([]any, error) {
	inline := make([]any, len(refs))
	for i, ref := range refs {
		if ref.Inline == nil {
			if err := app.Require(k, ref.ID); err != nil {
				return nil, err
			}
			continue
		}
		v, err := rulestore.Parse(k, ref.ID, ref.Inline)
		if err != nil {
			return nil, fmt.Errorf("inline %s rule %q: %w", k, ref.ID, err)
		}
		if app.Static(k, ref.ID) != nil { // also when a Redis overlay covers it
			return nil, fmt.Errorf("%s rule %q is declared both inline and in the global rulestore block", k, ref.ID)
		}
		inline[i] = v
	}
	if route == "" {
		return inline, nil
	}
	if err := app.Require(rulestore.Binding, route); err != nil {
		return nil, err
	}
	if b := app.Route(route); b != nil {
		for _, id := range pick(b) {
			if err := app.Require(k, id); err != nil {
				return nil, fmt.Errorf("route %q: %w", route, err)
			}
		}
	}
	return inline, nil
}
