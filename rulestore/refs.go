package rulestore

import (
	"errors"
	"fmt"
	"sort"

	"github.com/sluicegw/sluice/rulestore/rawfields"
)

// Ref is one rule's reference to another: a binding's rate_limit, a gray
// rule's fallback_on_open. Field is the referring field, for the message.
type Ref struct {
	Field string
	Kind  Kind
	ID    string
}

// Referrer is implemented by rule values that name other rules, so the store
// can check the references without knowing the kind.
type Referrer interface {
	Refs() []Ref
}

// Refs lists the rules a route binding names.
func (b *RouteBinding) Refs() []Ref {
	var refs []Ref
	for _, id := range b.RateLimits {
		refs = append(refs, Ref{"rate_limit", RateLimit, id})
	}
	if b.CircuitBreaker != "" {
		refs = append(refs, Ref{"circuit_breaker", CircuitBreaker, b.CircuitBreaker})
	}
	for _, id := range b.Gray {
		refs = append(refs, Ref{"gray", Gray, id})
	}
	return refs
}

// MissingError says that a rule (or route binding) named somewhere does not
// exist. Without Redis that is a typo, found at validate time.
type MissingError struct {
	Kind  Kind
	ID    string
	Known []string // ids of that kind that do exist, for a suggestion
}

func (e *MissingError) Error() string {
	what := e.Kind.String() + " rule"
	if e.Kind == Binding {
		what = "route binding"
	}
	hint := ""
	if s := Suggest(e.ID, e.Known...); s != "" && s != e.ID {
		hint = " (did you mean " + s + "?)"
	}
	return fmt.Sprintf("no %s %q%s: declare it in the global rulestore block, or configure redis there if it lives in Redis",
		what, e.ID, hint)
}

// Declared answers whether a rule of kind k with this id exists; the ids
// of a kind are listed for suggestions.
type Declared interface {
	Has(k Kind, id string) bool
	IDs(k Kind) []string
}

// CheckRef returns a *MissingError if id of kind k is not declared.
func CheckRef(d Declared, k Kind, id string) error {
	if d.Has(k, id) {
		return nil
	}
	return &MissingError{Kind: k, ID: id, Known: d.IDs(k)}
}

// CheckRefs checks every reference of a parsed rule value; a dangling one is
// a *FieldError on the referring field, wrapping a *MissingError.
func CheckRefs(d Declared, value any) error {
	ref, ok := value.(Referrer)
	if !ok {
		return nil
	}
	for _, r := range ref.Refs() {
		if err := CheckRef(d, r.Kind, r.ID); err != nil {
			return rawfields.Caused(r.Field, err)
		}
	}
	return nil
}

// IsMissing reports whether err is (or wraps) a *MissingError.
func IsMissing(err error) bool {
	var m *MissingError
	return errors.As(err, &m)
}

// staticDeclared is the rules a config declares (static, plus any written
// through the admin API without Redis), for checks at provision time.
type staticDeclared struct{ a *App }

func (s staticDeclared) Has(k Kind, id string) bool { return s.a.Lookup(k, id) != nil }

func (s staticDeclared) IDs(k Kind) []string { return sortedIDs(s.a.Rules(k)) }

// checkStaticRefs fails a config without Redis whose static rules name a
// rule that does not exist: nothing could ever supply it.
func (a *App) checkStaticRefs() error {
	for _, k := range Kinds() {
		for _, id := range sortedIDs(a.static[k]) {
			if err := CheckRefs(staticDeclared{a}, a.static[k][id].Value); err != nil {
				return fmt.Errorf("static %s rule %q: %w", k, id, err)
			}
		}
	}
	return nil
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
