package handlerkit

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sluicegw/sluice/rulestore"
)

// ListDirective describes a handler directive that applies an ordered list
// of rules, each by id or inline, or the list a route binding names
// (grayroute).
type ListDirective struct {
	Name   string         // the directive, for errors: "grayroute"
	Kind   rulestore.Kind // the kind of its rules
	Inline string         // the block line declaring an inline rule: "gray"
	// RefFields are inline rule fields that name a rule of another kind,
	// checked against the rulestore block like rule and route.
	RefFields map[string]rulestore.Kind
	// Options are the directive's own block lines, after rule, route and
	// Inline; their order is the "(want ...)" order of an unknown line.
	Options []Option
}

// Option is one of a directive's own block lines. Parse is called with d
// at the line's name and reads its arguments.
type Option struct {
	Name  string
	Parse func(d *caddyfile.Dispenser) error
}

// listEntry is one rule of a list directive's block: an id, with fields
// when inline.
type listEntry struct {
	ID     string
	Inline rulestore.Fields
}

// ParsedList is what a list directive's block said.
type ParsedList struct {
	Rules []listEntry
	Route string
	Refs  []rulestore.CaddyfileRef // rules and routes named, for RequireAll
}

// ParseCaddyfile reads:
//
//	<directive> [<matcher>] [<rule-id> ...] [{
//		rule   <id> [<id> ...]
//		route  <name>
//		<Inline> <id> { <field> <value> ... }
//		<option> ...
//	}]
//
// An inline rule is validated here, a bad field failing at its line.
func (dir ListDirective) ParseCaddyfile(d *caddyfile.Dispenser) (*ParsedList, error) {
	p := &ParsedList{}
	d.Next() // directive name
	for d.NextArg() {
		if err := p.add(d, dir, listEntry{ID: d.Val()}, true); err != nil {
			return nil, err
		}
	}
	for d.NextBlock(0) {
		if err := dir.line(d, p); err != nil {
			return nil, err
		}
	}
	switch {
	case p.Route != "" && len(p.Rules) > 0:
		return nil, d.Errf("%s: give either a route or rules, not both", dir.Name)
	case p.Route == "" && len(p.Rules) == 0:
		return nil, d.Errf("%s: no %s rules: give rule ids, inline %[2]s rules or a route", dir.Name, dir.Kind)
	}
	return p, nil
}

// line reads one block line.
func (dir ListDirective) line(d *caddyfile.Dispenser, p *ParsedList) error {
	switch name := d.Val(); name {
	case "rule":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("%s: rule needs one or more rule ids", dir.Name)
		}
		for _, id := range args {
			if err := p.add(d, dir, listEntry{ID: id}, true); err != nil {
				return err
			}
		}
	case dir.Inline:
		return dir.inline(d, p)
	case "route":
		if !d.NextArg() {
			return d.Errf("%s: route needs a route name", dir.Name)
		}
		if p.Route != "" {
			return d.Errf("%s: route given twice", dir.Name)
		}
		p.Route = d.Val()
		if err := rulestore.ValidID(p.Route); err != nil {
			return d.Errf("%s: route: %v", dir.Name, err)
		}
		p.Refs = append(p.Refs, rulestore.CaddyfileRef{Tok: d.Token(), Kind: rulestore.Binding, ID: p.Route})
		if d.NextArg() {
			return d.ArgErr()
		}
	default:
		for _, o := range dir.Options {
			if o.Name == name {
				return o.Parse(d)
			}
		}
		known := []string{"rule", "route", dir.Inline}
		for _, o := range dir.Options {
			known = append(known, o.Name)
		}
		return rulestore.UnknownField(d, dir.Name, name, known...)
	}
	return nil
}

// inline reads `<Inline> <id> { fields }`.
func (dir ListDirective) inline(d *caddyfile.Dispenser, p *ParsedList) error {
	if !d.NextArg() {
		return d.Errf("%s: %s needs a rule id and a { field value ... } block", dir.Name, dir.Inline)
	}
	id := d.Val()
	if err := rulestore.ValidID(id); err != nil {
		return d.Errf("%s: %v", dir.Name, err)
	}
	fields, lines, err := rulestore.UnmarshalFieldsTokens(d, dir.Kind, id)
	if err != nil {
		return err
	}
	for _, f := range fields.Names() {
		if k, ok := dir.RefFields[f]; ok {
			p.Refs = append(p.Refs, rulestore.CaddyfileRef{Tok: lines[f], Kind: k, ID: fields[f]})
		}
	}
	if len(fields) == 0 {
		return d.Errf("%s: inline %s rule %q has no fields", dir.Name, dir.Kind, id)
	}
	if _, err := rulestore.SpecFromFields(dir.Kind, fields); err != nil {
		return rulestore.ErrAtField(d.Token(), lines, err, "%s: inline %s rule %q: %v", dir.Name, dir.Kind, id, err)
	}
	return p.add(d, dir, listEntry{ID: id, Inline: fields}, false)
}

// add appends a rule once; named says the rule is the store's, checked
// against the rulestore block.
func (p *ParsedList) add(d *caddyfile.Dispenser, dir ListDirective, ref listEntry, named bool) error {
	if err := rulestore.ValidID(ref.ID); err != nil {
		return d.Errf("%s: %v", dir.Name, err)
	}
	for _, r := range p.Rules {
		if r.ID == ref.ID {
			return d.Errf("%s: %s rule %q listed twice", dir.Name, dir.Kind, ref.ID)
		}
	}
	p.Rules = append(p.Rules, ref)
	if named {
		p.Refs = append(p.Refs, rulestore.CaddyfileRef{Tok: d.Token(), Kind: dir.Kind, ID: ref.ID})
	}
	return nil
}

// ListSelection returns what a list directive's block selected, its inline
// rules as the kind's typed rules.
func ListSelection[S rulestore.Spec](k rulestore.Kind, p *ParsedList) (Selection[S], error) {
	sel := Selection[S]{Route: p.Route}
	for _, r := range p.Rules {
		ref := RuleRef[S]{ID: r.ID}
		if r.Inline != nil {
			s, err := rulestore.SpecFromFields(k, r.Inline)
			if err != nil {
				return sel, fmt.Errorf("inline %s rule %q: %w", k, r.ID, err)
			}
			ref.Inline = s.(S)
		}
		sel.Rules = append(sel.Rules, ref)
	}
	return sel, nil
}
