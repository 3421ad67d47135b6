package handlerkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/sluicegw/sluice/rulestore"
)

// Selection says which rules a handler applies, as its config gave them:
// one rule (Rule, Route naming one, or Inline), or a list of rules (Rules
// and Inlines, or Route naming several). S is the kind's typed rule
// (*rulestore.RateLimitSpec, ...). Each handler declares the fields it
// takes itself, documented for its JSON, and hands them over here (its
// selection method): ratelimit all of them, circuitbreaker Rule, Route and
// Inline, grayroute Rules and Route.
type Selection[S rulestore.Spec] struct {
	// Rule is the id of a rule in the rule store.
	Rule string
	// Route names a route binding; its field of the handler's kind names
	// the rule (or rules), followed live.
	Route string
	// Inline declares the one rule in place; its optional "id" names it.
	Inline S
	// Rules are rule ids of the store or inline rules with their id, in
	// order; Inlines are inline rules after them, each named like Inline.
	Rules   []RuleRef[S]
	Inlines []S

	OnMissing
}

// InlineIDField is the pseudo-field of an inline rule that names it.
const InlineIDField = "id"

// inlineRule is an inline rule declared in a selection: its id (explicit,
// or the hash of its fields) and its fields without the id.
type inlineRule struct {
	id       string
	explicit bool
	f        rulestore.Fields
}

// declared reads spec s as an inline rule; id is the list entry's id, ""
// for one that names itself with an "id" field (or does not).
func declared[S rulestore.Spec](id string, s S) inlineRule {
	f := rulestore.SpecFields(s)
	if own := f[InlineIDField]; own != "" && id == "" {
		id = own
	}
	delete(f, InlineIDField)
	r := inlineRule{id: id, explicit: id != "", f: f}
	if id == "" {
		r.id = InlineID(f)
	}
	return r
}

// InlineID names an inline rule by a hash of its fields, so the same rule
// keeps its state across reloads and a changed one starts afresh.
func InlineID(f rulestore.Fields) string {
	sum := f.Digest()
	return "inline:" + hex.EncodeToString(sum[:8])
}

// isList reports whether the selection is a list (Rules or Inlines).
func (s *Selection[S]) isList() bool { return len(s.Rules)+len(s.Inlines) > 0 }

// hasInline reports whether the one rule is given inline.
func (s *Selection[S]) hasInline() bool { return len(rulestore.SpecFields(s.Inline)) > 0 }

// Validate checks the selection: one rule source, or a list of rules that
// are each well formed and listed once, not mixed with the one-rule form;
// directive names the handler in errors.
func (s *Selection[S]) Validate(directive string, k rulestore.Kind) error {
	if err := s.OnMissing.Validate(directive); err != nil {
		return err
	}
	if s.isList() {
		return s.validateList(directive, k)
	}
	n := 0
	for _, set := range []bool{s.Rule != "", s.Route != "", s.hasInline()} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return fmt.Errorf("%s: no %s rules: give rule ids, inline %[2]s rules or a route", directive, k)
	case n > 1:
		return fmt.Errorf("%s: give exactly one of rule <id>, route <name> or inline rule fields", directive)
	case s.Rule != "":
		return prefix(directive, rulestore.ValidID(s.Rule))
	case s.Route != "":
		return prefix(directive, rulestore.ValidID(s.Route))
	}
	if id := rulestore.SpecFields(s.Inline)[InlineIDField]; id != "" {
		return prefix(directive+" inline rule", rulestore.ValidID(id))
	}
	return nil
}

// validateList checks Rules and Inlines.
func (s *Selection[S]) validateList(directive string, k rulestore.Kind) error {
	switch {
	case s.Route != "":
		return fmt.Errorf("%s: give either a route or rules, not both", directive)
	case s.Rule != "" || s.hasInline():
		return fmt.Errorf("%s: rules and inlines cannot be mixed with rule or inline", directive)
	}
	seen := map[string]bool{}
	once := func(id string) error {
		if seen[id] {
			return fmt.Errorf("%s: %s rule %q listed twice", directive, k, id)
		}
		seen[id] = true
		return nil
	}
	for _, r := range s.Rules {
		if err := rulestore.ValidID(r.ID); err != nil {
			return fmt.Errorf("%s: rules: %w", directive, err)
		}
		if own := rulestore.SpecFields(r.Inline)[InlineIDField]; own != "" && own != r.ID {
			return fmt.Errorf("%s: rules: entry %q names its inline rule %q: give the id once", directive, r.ID, own)
		}
		if err := once(r.ID); err != nil {
			return err
		}
	}
	for i, in := range s.Inlines {
		f := rulestore.SpecFields(in)
		if len(f) == 0 {
			return fmt.Errorf("%s: inlines[%d] has no fields", directive, i)
		}
		if id := f[InlineIDField]; id != "" {
			if err := rulestore.ValidID(id); err != nil {
				return fmt.Errorf("%s inline rule: %w", directive, err)
			}
		}
		if err := once(declared("", in).id); err != nil {
			return err
		}
	}
	return nil
}

// Chosen is a selection as provisioned: its inline rules parsed, under
// the ids their state is found by.
type Chosen struct {
	// Inline is the one inline rule; nil without one.
	Inline *Choice
	// List is Rules then Inlines, in order; nil for the one-rule form.
	List []Choice
}

// Choice is one rule of a selection: a rule of the store (Rule nil) or an
// inline rule.
type Choice struct {
	ID string
	// Rule is the inline rule parsed as the kind's rule; nil for a rule
	// of the store.
	Rule any
	// Digest is the inline rule's fields, without its id: a reload that
	// changes them under one id puts the new fields in force.
	Digest [sha256.Size]byte
}

// Provision checks a validated selection against the store and parses its
// inline rules: a named rule must exist (or can come from Redis), as must
// a route binding and the rules of kind k it names now (pick); an inline
// rule must parse and follow the one rule of inline identity (StateID).
func (s *Selection[S]) Provision(app *rulestore.App, k rulestore.Kind, directive string, pick func(*rulestore.RouteBinding) []string) (*Chosen, error) {
	c := &Chosen{}
	switch {
	case s.Rule != "":
		return c, prefix(directive, app.Require(k, s.Rule))
	case s.Route != "":
		if err := app.Require(rulestore.Binding, s.Route); err != nil {
			return nil, prefix(directive, err)
		}
		if b := app.Route(s.Route); b != nil {
			for _, id := range pick(b) {
				if err := app.Require(k, id); err != nil {
					return nil, fmt.Errorf("%s: route %q: %w", directive, s.Route, err)
				}
			}
		}
		return c, nil
	case s.hasInline():
		ch, err := provisionInline(app, k, directive, declared("", s.Inline))
		c.Inline = &ch
		return c, err
	}
	c.List = make([]Choice, 0, len(s.Rules)+len(s.Inlines))
	for _, r := range s.Rules {
		if !r.HasInline() {
			if err := app.Require(k, r.ID); err != nil {
				return nil, prefix(directive, err)
			}
			c.List = append(c.List, Choice{ID: r.ID})
			continue
		}
		ch, err := provisionInline(app, k, directive, declared(r.ID, r.Inline))
		if err != nil {
			return nil, err
		}
		c.List = append(c.List, ch)
	}
	for _, in := range s.Inlines {
		ch, err := provisionInline(app, k, directive, declared("", in))
		if err != nil {
			return nil, err
		}
		c.List = append(c.List, ch)
	}
	return c, nil
}

// provisionInline parses an inline rule under the id its state is found by.
func provisionInline(app *rulestore.App, k rulestore.Kind, directive string, in inlineRule) (Choice, error) {
	if err := in.stateID(app, k, directive); err != nil {
		return Choice{}, err
	}
	if in.explicit && app.Static(k, in.id) != nil { // also when a Redis overlay covers it
		return Choice{}, fmt.Errorf("%s: inline rule id %q is also a %s rule of the rulestore block", directive, in.id, k)
	}
	v, err := rulestore.Parse(k, in.id, in.f)
	if err != nil {
		return Choice{}, fmt.Errorf("%s: inline %s rule %q: %w", directive, k, in.id, err)
	}
	app.WarnRenamed(k, in.id, in.f)
	return Choice{ID: in.id, Rule: v, Digest: in.f.Digest()}, nil
}

// stateID applies the one rule of inline identity, in all three handlers:
// an inline rule's state is found by its id, explicit or the hash of its
// fields. An explicit id is shared by every block that gives it, which
// must then give the same fields. A Caddyfile names every block
// (inlineNames); in JSON two blocks of a kind with identical fields and no
// id are an error, since Caddy provisions servers in no fixed order and a
// number would not stay with its block (docs/rulestore.md, "Which inline
// rules share state").
func (in inlineRule) stateID(app *rulestore.App, k rulestore.Kind, directive string) error {
	if in.explicit {
		if !app.SameAsDeclared(k.String()+" inline id "+in.id, in.f.Digest()) {
			return fmt.Errorf("%s: two inline %s rules give id %q with different fields: blocks that give one id share one rule, so give them the same fields, or each an id of its own", directive, k, in.id)
		}
		return nil
	}
	if app.Occurrence(k.String()+" inline "+in.id) > 1 {
		return fmt.Errorf("%s: two inline %s rules without an id have the same fields (%s): give each an id (the same id to share one state)", directive, k, in.id)
	}
	return nil
}

func prefix(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
