package handlerkit

import (
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/rulestore"
)

// Directive describes a handler directive whose block selects one rule.
type Directive struct {
	Name string         // the directive, for errors: "ratelimit"
	Kind rulestore.Kind // the kind of rule it applies
	// Line, if set, reads a block line that is neither rule, route, id nor
	// a field of the kind; handled is false for a line it does not know.
	// circuitbreaker's `header <name> <value>` adds to the headers field.
	Line func(tok caddyfile.Token, name string, args []string, p *Parsed) (handled bool, err error)
	// List, if set, is the block line declaring one of several inline
	// rules (`limit [<id>] { <field> <value> ... }`); with it the
	// directive also takes several rule ids (`<directive> <id> <id>`,
	// `rule <id> <id>`): a list of rules that all apply (ratelimit).
	// Without it, one rule (circuitbreaker).
	List string
	// ListOnly: the directive always applies a list (grayroute): rule ids
	// and List blocks in the order written, a list of one included, ids
	// also before a block; no rule fields directly in the block.
	ListOnly bool
	// ListNeedsID: a List block names its rule (`gray <id> { ... }`).
	ListNeedsID bool
	// RefFields are inline rule fields that name a rule of another kind,
	// checked against the rulestore block like rule and route.
	RefFields map[string]rulestore.Kind
	// Options are a ListOnly directive's own block lines; their order is
	// the "(want ...)" order of an unknown line.
	Options []Option
}

// Option is one of a directive's own block lines. Parse is called with d
// at the line's name and reads its arguments.
type Option struct {
	Name  string
	Parse func(d *caddyfile.Dispenser) error
}

// Parsed is what a directive's block said, with the lines to point at.
type Parsed struct {
	Rule, Route string
	Inline      rulestore.Fields         // the inline rule's fields (and id)
	Refs        []rulestore.CaddyfileRef // rules and routes named, for RequireAll
	RuleTok     caddyfile.Token          // where Rule was named
	Start       caddyfile.Token          // the directive
	Lines       map[string]caddyfile.Token
	OnMissing   OnMissing // on_missing_rule
	// With Directive.List: several rule ids (Rules, named at RuleToks)
	// and inline rules (Inlines), in the order written. Rule is then "".
	Rules    []string
	RuleToks []caddyfile.Token
	Inlines  []InlineBlock
	order    []string // Rules and Inlines' ids, as written
	kind     rulestore.Kind
	listOnly bool
}

// Field sets an inline field at tok's line; several calls append with sep.
func (p *Parsed) Field(tok caddyfile.Token, name, value, sep string) {
	if p.Inline == nil {
		p.Inline = rulestore.Fields{}
	}
	if old, ok := p.Inline[name]; ok {
		value = old + sep + value
	} else {
		p.Lines[name] = tok
	}
	p.Inline[name] = value
}

// ParseCaddyfile reads the common prologue of ratelimit and circuitbreaker:
//
//	<directive> [<matcher>] <rule-id>
//	<directive> [<matcher>] {
//		rule <id> | route <name> | [id <id>] <rule field> <value...> ...
//	}
//
// An inline rule is validated here, a bad field failing at its line.
func (dir Directive) ParseCaddyfile(d *caddyfile.Dispenser) (*Parsed, error) {
	p := &Parsed{Lines: map[string]caddyfile.Token{}, kind: dir.Kind, listOnly: dir.ListOnly}
	d.Next() // directive name
	p.Start = d.Token()
	if dir.ListOnly {
		return p, dir.parseList(d, p)
	}
	if d.NextArg() {
		if err := dir.parseIDs(d, p); err != nil {
			return nil, err
		}
		return p, nil
	}
	known := rulestore.FieldNames(dir.Kind)
	for d.NextBlock(0) {
		if err := dir.blockLine(d, p, known); err != nil {
			return nil, err
		}
	}
	p.listRule()
	return p, p.check(dir)
}

// parseIDs reads `<directive> <rule-id> [<rule-id>...]`, d at the first id.
func (dir Directive) parseIDs(d *caddyfile.Dispenser, p *Parsed) error {
	if err := p.name(d, dir, "rule", d.Val()); err != nil {
		return err
	}
	for d.NextArg() {
		if dir.List == "" {
			return d.ArgErr()
		}
		if err := p.addRule(d, dir, d.Val()); err != nil {
			return err
		}
	}
	if d.NextBlock(0) {
		return d.Errf("%s: give a rule id or a block, not both", dir.Name)
	}
	p.listRule()
	return nil
}

// blockLine reads one line of the block: one of the directive's own, or
// a field of the inline rule (known are the kind's field names).
func (dir Directive) blockLine(d *caddyfile.Dispenser, p *Parsed, known []string) error {
	name, tok := d.Val(), d.Token()
	args := d.RemainingArgs()
	field, err := dir.ownLine(d, p, known, name, tok, args)
	if err != nil || !field {
		return err
	}
	if p.Rule != "" || p.Route != "" || len(p.Rules)+len(p.Inlines) > 0 {
		return d.Errf("%s: inline rule field %s cannot be mixed with rule or route", dir.Name, name)
	}
	if _, dup := p.Inline[name]; dup {
		return d.Errf("%s: field %s given twice", dir.Name, name)
	}
	p.Field(tok, name, strings.Join(args, " "), "")
	return nil
}

// ownLine reads a line of the directive's own (rule, route, a List block,
// on_missing_rule, a Line hook's); field is true for a line that is an
// inline rule field (id among them), checked but left to the caller.
func (dir Directive) ownLine(d *caddyfile.Dispenser, p *Parsed, known []string, name string, tok caddyfile.Token, args []string) (field bool, err error) {
	switch {
	case name == "rule" && dir.List != "":
		if len(args) == 0 {
			return false, d.Errf("%s: rule wants one or more rule ids", dir.Name)
		}
		if len(p.Inline) > 0 {
			return false, d.Errf("%s: rule cannot be mixed with inline rule fields", dir.Name)
		}
		for _, id := range args {
			if err := p.ruleArg(d, dir, id); err != nil {
				return false, err
			}
		}
		return false, nil
	case name == "rule" || name == "route":
		if len(args) != 1 {
			return false, d.Errf("%s: %s wants one value", dir.Name, name)
		}
		if len(p.Inline) > 0 {
			return false, d.Errf("%s: %s cannot be mixed with inline rule fields", dir.Name, name)
		}
		if name == "route" && len(p.Rules)+len(p.Inlines) > 0 {
			return false, d.Errf("%s: give either a route or rules, not both", dir.Name)
		}
		if err := p.name(d, dir, name, args[0]); err != nil {
			return false, err
		}
		return false, nil
	case dir.List != "" && name == dir.List:
		if err := p.limitBlock(d, dir, tok, args); err != nil {
			return false, err
		}
		return false, nil
	case name == "on_missing_rule":
		if len(args) != 1 {
			return false, d.Errf("%s: on_missing_rule wants pass or refuse", dir.Name)
		}
		p.OnMissing.OnMissingRule = args[0]
		if err := p.OnMissing.Validate(dir.Name); err != nil {
			return false, rulestore.ErrAt(tok, "%v", err)
		}
		return false, nil
	case name == InlineIDField:
		if len(args) != 1 {
			return false, d.Errf("%s: id wants one value", dir.Name)
		}
		if err := rulestore.ValidID(args[0]); err != nil {
			return false, d.Errf("%s: id: %v", dir.Name, err)
		}
	case dir.Line != nil:
		handled, err := dir.Line(tok, name, args, p)
		if err != nil {
			return false, rulestore.ErrAt(tok, "%s: %v", dir.Name, err)
		}
		if handled {
			return false, nil
		}
		fallthrough
	default:
		if !slices.Contains(known, name) {
			return false, rulestore.UnknownField(d, dir.Name, name, append([]string{"rule", "route", InlineIDField, "on_missing_rule"}, known...)...)
		}
		if len(args) == 0 {
			return false, d.Errf("%s: field %s needs a value", dir.Name, name)
		}
	}
	return true, nil
}

// name records `rule <id>` or `route <name>`, once.
func (p *Parsed) name(d *caddyfile.Dispenser, dir Directive, which, id string) error {
	if err := rulestore.ValidID(id); err != nil {
		return d.Errf("%s %s: %v", dir.Name, which, err)
	}
	if p.Rule != "" || p.Route != "" {
		return d.Errf("%s: give one of rule or route, once", dir.Name)
	}
	ref := rulestore.CaddyfileRef{Tok: d.Token(), Kind: dir.Kind, ID: id}
	if which == "rule" {
		p.Rule, p.RuleTok = id, d.Token()
	} else {
		p.Route, ref.Kind = id, rulestore.Binding
	}
	p.Refs = append(p.Refs, ref)
	return nil
}

// check applies Selection.Validate's rule at the block's lines and validates
// an inline rule.
func (p *Parsed) check(dir Directive) error {
	switch {
	case (p.Rule != "" || p.Route != "") && len(p.Inline) > 0: // a Line hook's field
		return rulestore.ErrAt(p.Start, "%s: rule or route cannot be mixed with inline rule fields", dir.Name)
	case len(p.Rules)+len(p.Inlines) > 0:
		return nil // checked as read
	case p.Rule == "" && p.Route == "" && len(p.Inline) == 0:
		return rulestore.ErrAt(p.Start, "%s: give a rule id, a block with rule <id> or route <name>, or inline rule fields", dir.Name)
	case len(p.Inline) == 0:
		return nil
	}
	f := make(rulestore.Fields, len(p.Inline))
	for k, v := range p.Inline {
		f[k] = v
	}
	id := f[InlineIDField]
	delete(f, InlineIDField)
	if id == "" {
		id = InlineID(f)
	}
	if len(f) == 0 {
		return rulestore.ErrAt(p.Lines[InlineIDField], "%s: inline rule %q has no fields", dir.Name, id)
	}
	if _, err := rulestore.Parse(dir.Kind, id, f); err != nil {
		return rulestore.ErrAtField(p.Start, p.Lines, err, "%s: inline %s rule: %v", dir.Name, dir.Kind, err)
	}
	return nil
}

// ToSelection returns what the block selected, its inline rules as the
// kind's typed rules.
func ToSelection[S rulestore.Spec](p *Parsed) (Selection[S], error) {
	if p.listOnly {
		return toList[S](p)
	}
	sel := Selection[S]{Rule: p.Rule, Route: p.Route, Rules: Refs[S](p.Rules...), OnMissing: p.OnMissing}
	if len(p.Rules) == 0 {
		sel.Rules = nil
	}
	if len(p.Inline) > 0 {
		s, err := rulestore.SpecFromFields(p.kind, p.Inline)
		if err != nil {
			return sel, rulestore.ErrAtField(p.Start, p.Lines, err, "inline %s rule: %v", p.kind, err)
		}
		sel.Inline = s.(S)
	}
	for _, b := range p.Inlines {
		s, err := rulestore.SpecFromFields(p.kind, b.Fields)
		if err != nil {
			return sel, rulestore.ErrAtField(b.Start, b.Lines, err, "inline %s rule: %v", p.kind, err)
		}
		sel.Inlines = append(sel.Inlines, s.(S))
	}
	return sel, nil
}

// toList is a ListOnly directive's selection: its rules in the order
// written, each inline block an entry with its id, all written as objects
// in the adapted JSON (grayroute's form).
func toList[S rulestore.Spec](p *Parsed) (Selection[S], error) {
	sel := Selection[S]{Route: p.Route, OnMissing: p.OnMissing}
	for _, id := range p.order {
		ref := RuleRef[S]{ID: id, object: true}
		for _, b := range p.Inlines {
			if b.ID() != id {
				continue
			}
			f := make(rulestore.Fields, len(b.Fields))
			for k, v := range b.Fields {
				if k != InlineIDField {
					f[k] = v
				}
			}
			s, err := rulestore.SpecFromFields(p.kind, f)
			if err != nil {
				return sel, rulestore.ErrAtField(b.Start, b.Lines, err, "inline %s rule %q: %v", p.kind, id, err)
			}
			ref.Inline = s.(S)
		}
		sel.Rules = append(sel.Rules, ref)
	}
	return sel, nil
}

// UnmarshalDirective reads a directive into h, then checks the rules and
// routes it named (a.Refs, filled by h) against the Caddyfile's rulestore
// block, where an error can still name the line. h names its inline rules
// with a (Adapted.Take).
func UnmarshalDirective(hp httpcaddyfile.Helper, name string, h caddyfile.Unmarshaler, a *Adapted) error {
	a.names = inlineNamesIn(hp)
	if err := h.UnmarshalCaddyfile(hp.Dispenser); err != nil {
		return err
	}
	return rulestore.DeclaredIn(hp).RequireAll(name, a.Refs)
}

// Adapting is a handler that reads its own directive, keeping an Adapted
// while its Caddyfile block is adapted.
type Adapting interface {
	caddyhttp.MiddlewareHandler
	caddyfile.Unmarshaler
	Adapting() *Adapted
}

// Parser is the httpcaddyfile parser of a handler directive: a new
// handler (a *T) reads its block (UnmarshalDirective).
func Parser[T any, PT interface {
	*T
	Adapting
}](name string) httpcaddyfile.UnmarshalHandlerFunc {
	return func(hp httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		h := PT(new(T))
		if err := UnmarshalDirective(hp, name, h, h.Adapting()); err != nil {
			return nil, err
		}
		return h, nil
	}
}
