package handlerkit

import (
	"encoding/hex"
	"fmt"

	"github.com/sluicegw/sluice/rulestore"
)

// RuleSource says which rule a ratelimit or circuitbreaker handler applies:
// exactly one of Rule, Route and Inline. S is the kind's typed rule
// (*rulestore.RateLimitSpec, *rulestore.CircuitBreakerSpec). It is not a
// route binding (the rule store's binding kind), though Route names one.
// A handler declares these fields itself, documented for its JSON, and
// hands them over here (see the handlers' source method).
type RuleSource[S rulestore.Spec] struct {
	// Rule is the id of a rule in the rule store.
	Rule string `json:"rule,omitempty"`
	// Route names a route binding; its field of this handler's kind
	// (rate_limit, circuit_breaker) names the rule, followed live.
	Route string `json:"route,omitempty"`
	// Inline declares the rule in place, with the rule store's field names.
	// Its optional "id" names it (labels, error bodies, RateLimit-Policy);
	// without one its id is inline:<hash of the fields> (StateID).
	Inline S `json:"inline,omitempty"`

	OnMissing
}

// inline returns the inline rule's fields, nil without one.
func (b *RuleSource[S]) inline() rulestore.Fields { return rulestore.SpecFields(b.Inline) }

// HasInline reports whether the rule is given inline.
func (b *RuleSource[S]) HasInline() bool { return len(b.inline()) > 0 }

// InlineIDField is the pseudo-field of an inline rule that names it.
const InlineIDField = "id"

// Validate checks that exactly one of Rule, Route and Inline is given and
// that the ids are well formed; directive names the handler in errors.
func (b *RuleSource[S]) Validate(directive string) error {
	n := 0
	for _, set := range []bool{b.Rule != "", b.Route != "", b.HasInline()} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%s: give exactly one of rule <id>, route <name> or inline rule fields", directive)
	}
	if err := b.OnMissing.Validate(directive); err != nil {
		return err
	}
	switch {
	case b.Rule != "":
		return prefix(directive, rulestore.ValidID(b.Rule))
	case b.Route != "":
		return prefix(directive, rulestore.ValidID(b.Route))
	}
	if id, ok := b.inline()[InlineIDField]; ok {
		return prefix(directive+" inline rule", rulestore.ValidID(id))
	}
	return nil
}

// InlineRule returns the inline rule's id and its fields without the id.
func (b *RuleSource[S]) InlineRule() (id string, f rulestore.Fields) {
	f = b.inline()
	id = f[InlineIDField]
	delete(f, InlineIDField)
	if id == "" {
		id = InlineID(f)
	}
	return id, f
}

// StateID is the id an inline rule's state is found by: its id, explicit
// or the hash of its fields. An explicit id is shared by every block that
// gives it, which must then give the same fields. A Caddyfile names every block (inlineNames); in JSON two
// blocks of a kind with identical fields and no id are an error, since
// Caddy provisions servers in no fixed order and a number would not stay
// with its block (docs/rulestore.md, "Which inline rules share state").
func (b *RuleSource[S]) StateID(app *rulestore.App, k rulestore.Kind, directive string) (string, error) {
	id, f := b.InlineRule()
	if b.ExplicitID() {
		if !app.SameAsDeclared(k.String()+" inline id "+id, f.Digest()) {
			return "", fmt.Errorf("%s: two inline %s rules give id %q with different fields: blocks that give one id share one rule, so give them the same fields, or each an id of its own", directive, k, id)
		}
		return id, nil
	}
	if app.Occurrence(k.String()+" inline "+id) > 1 {
		return "", fmt.Errorf("%s: two inline %s rules without an id have the same fields (%s): give each an id (the same id to share one state)", directive, k, id)
	}
	return id, nil
}

// ExplicitID reports whether the inline rule names itself.
func (b *RuleSource[S]) ExplicitID() bool { return b.inline()[InlineIDField] != "" }

// InlineID names an inline rule by a hash of its fields, so the same rule
// keeps its state across reloads and a changed one starts afresh.
func InlineID(f rulestore.Fields) string {
	sum := f.Digest()
	return "inline:" + hex.EncodeToString(sum[:8])
}

// ParseInline validates the inline rule as kind k under its id. An explicit
// id must not also be a rule of the config's rulestore block: the two would
// share state while being different rules.
func (b *RuleSource[S]) ParseInline(app *rulestore.App, k rulestore.Kind, directive, id string) (any, error) {
	_, f := b.InlineRule()
	if b.ExplicitID() && app.Static(k, id) != nil {
		return nil, fmt.Errorf("%s: inline rule id %q is also a %s rule of the rulestore block", directive, id, k)
	}
	v, err := rulestore.Parse(k, id, f)
	if err != nil {
		return nil, fmt.Errorf("%s: inline %s rule: %w", directive, k, err)
	}
	app.WarnRenamed(k, id, f)
	return v, nil
}

// Require checks at provision time that the named rule or route exists (or
// can come from Redis).
func (b *RuleSource[S]) Require(app *rulestore.App, k rulestore.Kind, directive string) error {
	var err error
	switch {
	case b.Rule != "":
		err = app.Require(k, b.Rule)
	case b.Route != "":
		err = app.Require(rulestore.Binding, b.Route)
	}
	return prefix(directive, err)
}

func prefix(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// NewRuleSource is a handler's own fields as a RuleSource.
func NewRuleSource[S rulestore.Spec](rule, route string, inline S, onMissingRule string) *RuleSource[S] {
	return &RuleSource[S]{Rule: rule, Route: route, Inline: inline, OnMissing: OnMissing{OnMissingRule: onMissingRule}}
}
