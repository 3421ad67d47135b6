package handlerkit

import (
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sluicegw/sluice/rulestore"
)

// A Directive with List reads a list of rules that all apply:
//
//	<directive> [<matcher>] <id> [<id> ...]
//	<directive> [<matcher>] {
//		rule <id> [<id> ...]
//		<List> [<id>] { <field> <value> ... }
//		...
//	}
//
// Rule ids and inline blocks mix; the inline single-rule form (fields
// directly in the block) and route do not mix with them.

// InlineBlock is one `<List> [<id>] { fields }` block: its fields (with
// "id" when it names itself) and the lines to point at.
type InlineBlock struct {
	Fields rulestore.Fields
	Start  caddyfile.Token
	Lines  map[string]caddyfile.Token
}

// ID is the block's rule id: its own, or the hash of its fields.
func (b InlineBlock) ID() string {
	if id := b.Fields[InlineIDField]; id != "" {
		return id
	}
	f := make(rulestore.Fields, len(b.Fields))
	for k, v := range b.Fields {
		f[k] = v
	}
	return InlineID(f)
}

// ruleArg records one rule id of a list directive: the first as Rule (a
// list of one is the one-rule form), the next ones in Rules.
func (p *Parsed) ruleArg(d *caddyfile.Dispenser, dir Directive, id string) error {
	if p.Rule == "" && p.Route == "" && len(p.Rules)+len(p.Inlines) == 0 {
		return p.name(d, dir, "rule", id)
	}
	return p.addRule(d, dir, id)
}

// addRule appends a rule id to the list, once.
func (p *Parsed) addRule(d *caddyfile.Dispenser, dir Directive, id string) error {
	if err := rulestore.ValidID(id); err != nil {
		return d.Errf("%s rule: %v", dir.Name, err)
	}
	if p.Route != "" {
		return d.Errf("%s: route cannot be mixed with a list of rules", dir.Name)
	}
	if id == p.Rule || slices.Contains(p.Rules, id) {
		return d.Errf("%s: %s rule %q listed twice", dir.Name, dir.Kind, id)
	}
	p.Rules, p.RuleToks, p.order = append(p.Rules, id), append(p.RuleToks, d.Token()), append(p.order, id)
	p.Refs = append(p.Refs, rulestore.CaddyfileRef{Tok: d.Token(), Kind: dir.Kind, ID: id})
	return nil
}

// listRule moves Rule into Rules when there is a list: Rule is then "".
func (p *Parsed) listRule() {
	if p.Rule != "" && len(p.Rules)+len(p.Inlines) > 0 {
		p.Rules = append([]string{p.Rule}, p.Rules...)
		p.RuleToks = append([]caddyfile.Token{p.RuleTok}, p.RuleToks...)
		p.Rule = ""
	}
}

// limitBlock reads `<List> [<id>] { <field> <value> ... }`, d after its
// arguments, and validates the rule, a bad field failing at its line.
func (p *Parsed) limitBlock(d *caddyfile.Dispenser, dir Directive, tok caddyfile.Token, args []string) error {
	if p.Route != "" {
		return d.Errf("%s: route cannot be mixed with a list of rules", dir.Name)
	}
	if len(p.Inline) > 0 {
		return d.Errf("%s: %s cannot be mixed with inline rule fields (put them in a %[2]s block too)", dir.Name, dir.List)
	}
	if len(args) > 1 {
		return d.Errf("%s: %s wants at most a rule id, then a { field value ... } block", dir.Name, dir.List)
	}
	if len(args) == 0 && dir.ListNeedsID {
		return d.Errf("%s: %s needs a rule id and a { field value ... } block", dir.Name, dir.List)
	}
	b := InlineBlock{Fields: rulestore.Fields{}, Start: tok, Lines: map[string]caddyfile.Token{}}
	if len(args) == 1 {
		if err := rulestore.ValidID(args[0]); err != nil {
			return d.Errf("%s: %s: %v", dir.Name, dir.List, err)
		}
		b.Fields[InlineIDField], b.Lines[InlineIDField] = args[0], tok
	}
	known := rulestore.FieldNames(dir.Kind)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name, ftok := d.Val(), d.Token()
		vals := d.RemainingArgs()
		if name != InlineIDField && !slices.Contains(known, name) {
			return rulestore.UnknownField(d, dir.Name+" "+dir.List, name, append([]string{InlineIDField}, known...)...)
		}
		if len(vals) == 0 {
			return d.Errf("%s: %s: field %s needs a value", dir.Name, dir.List, name)
		}
		if _, dup := b.Fields[name]; dup {
			return d.Errf("%s: %s: field %s given twice", dir.Name, dir.List, name)
		}
		if name == InlineIDField {
			if err := rulestore.ValidID(vals[0]); err != nil || len(vals) > 1 {
				return d.Errf("%s: %s: id wants one rule id", dir.Name, dir.List)
			}
		}
		b.Fields[name], b.Lines[name] = strings.Join(vals, " "), ftok
	}
	id := b.ID()
	f := make(rulestore.Fields, len(b.Fields))
	for k, v := range b.Fields {
		if k != InlineIDField {
			f[k] = v
		}
	}
	if len(f) == 0 {
		return rulestore.ErrAt(tok, "%s: %s block %q has no rule fields", dir.Name, dir.List, id)
	}
	if _, err := rulestore.Parse(dir.Kind, id, f); err != nil {
		return rulestore.ErrAtField(tok, b.Lines, err, "%s: inline %s rule %q: %v", dir.Name, dir.Kind, id, err)
	}
	if id == p.Rule || slices.Contains(p.Rules, id) || slices.ContainsFunc(p.Inlines, func(o InlineBlock) bool { return o.ID() == id }) {
		return rulestore.ErrAt(tok, "%s: %s rule %q listed twice", dir.Name, dir.Kind, id)
	}
	for _, name := range f.Names() {
		if k, ok := dir.RefFields[name]; ok {
			p.Refs = append(p.Refs, rulestore.CaddyfileRef{Tok: b.Lines[name], Kind: k, ID: f[name]})
		}
	}
	p.Inlines, p.order = append(p.Inlines, b), append(p.order, id)
	return nil
}

// parseList reads a ListOnly directive:
//
//	<directive> [<matcher>] [<rule-id> ...] [{
//		rule   <id> [<id> ...]
//		route  <name>
//		<List> <id> { <field> <value> ... }
//		on_missing_rule pass|refuse
//		<option> ...
//	}]
func (dir Directive) parseList(d *caddyfile.Dispenser, p *Parsed) error {
	for d.NextArg() {
		if err := p.addRule(d, dir, d.Val()); err != nil {
			return err
		}
	}
	for d.NextBlock(0) {
		if err := dir.listLine(d, p); err != nil {
			return err
		}
	}
	switch {
	case p.Route != "" && len(p.Rules)+len(p.Inlines) > 0:
		return d.Errf("%s: give either a route or rules, not both", dir.Name)
	case p.Route == "" && len(p.Rules)+len(p.Inlines) == 0:
		return d.Errf("%s: no %s rules: give rule ids, inline %[2]s rules or a route", dir.Name, dir.Kind)
	}
	return nil
}

// listLine reads one block line of a ListOnly directive, d at its name.
func (dir Directive) listLine(d *caddyfile.Dispenser, p *Parsed) error {
	switch name, tok := d.Val(), d.Token(); name {
	case "rule":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("%s: rule needs one or more rule ids", dir.Name)
		}
		for _, id := range args {
			if err := p.addRule(d, dir, id); err != nil {
				return err
			}
		}
	case "route":
		if !d.NextArg() {
			return d.Errf("%s: route needs a route name", dir.Name)
		}
		if p.Route != "" {
			return d.Errf("%s: route given twice", dir.Name)
		}
		if err := p.name(d, dir, "route", d.Val()); err != nil {
			return err
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	case dir.List:
		return p.limitBlock(d, dir, tok, d.RemainingArgs())
	case "on_missing_rule":
		return ParseOnMissing(d, dir.Name, &p.OnMissing)
	default:
		known := []string{"rule", "route", dir.List}
		for _, o := range dir.Options {
			if o.Name == name {
				return o.Parse(d)
			}
			known = append(known, o.Name)
		}
		return rulestore.UnknownField(d, dir.Name, name, append(known, "on_missing_rule")...)
	}
	return nil
}
