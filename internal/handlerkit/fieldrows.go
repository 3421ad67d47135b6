package handlerkit

import (
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// Field is one field of a rule kind: its name, its Syntax and Default as
// the kind's reference table in docs/ shows them (each handler's
// fields_test.go holds the two together), and how its value is read into
// the rule being parsed, P being the kind's parse state. A field that a
// step of the kind's ParseRule reads together with others has no Parse.
type Field[P any] struct {
	Name, Syntax, Default string
	Parse                 func(p P, v string) error
	// Bounds are a numeric field's range, which Parse checks (nil for
	// the others); the bounds test tries every row at them.
	Bounds *syntax.Bounds
	// Needs are the other fields a rule needs for this one to apply
	// (window_size: limit_type sliding_window); tests build rules with it.
	Needs rulestore.Fields
}

// In is f with the range b, which f's Parse checks.
func (f Field[P]) In(b *syntax.Bounds) Field[P] { f.Bounds = b; return f }

// Needing is f applying on rules that also have the fields given as name,
// value pairs.
func (f Field[P]) Needing(pairs ...string) Field[P] {
	needs := rulestore.Fields{}
	for k, v := range f.Needs {
		needs[k] = v
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		needs[pairs[i]] = pairs[i+1]
	}
	f.Needs = needs
	return f
}

// Row is a Field. Tables are written one call a row: go vet wants the
// fields of another package's struct named in a literal, which would
// make each row twice as long.
func Row[P any](name, syntax, def string, parse func(p P, v string) error) Field[P] {
	return Field[P]{Name: name, Syntax: syntax, Default: def, Parse: parse}
}

// FieldTable is a kind's fields, in the docs' order, indexed by name.
type FieldTable[P any] struct {
	rows   []Field[P]
	byName map[string]*Field[P]
}

// NewFieldTable indexes rows; a name given twice panics (a table is
// written once, in the source).
func NewFieldTable[P any](rows ...Field[P]) *FieldTable[P] {
	t := &FieldTable[P]{rows: rows, byName: make(map[string]*Field[P], len(rows))}
	for i := range t.rows {
		if t.byName[rows[i].Name] != nil {
			panic("field table: " + rows[i].Name + " twice")
		}
		t.byName[rows[i].Name] = &t.rows[i]
	}
	return t
}

// Rows are the fields in the docs' order; the caller must not change them.
func (t *FieldTable[P]) Rows() []Field[P] { return t.rows }

// Info are the rows as the rule store shows them to tests and tools.
func (t *FieldTable[P]) Info() []rulestore.FieldInfo {
	out := make([]rulestore.FieldInfo, len(t.rows))
	for i, f := range t.rows {
		out[i] = rulestore.FieldInfo{Name: f.Name, Syntax: f.Syntax, Default: f.Default, Bounds: f.Bounds, Needs: f.Needs}
	}
	return out
}

// Lookup is the named field, or nil.
func (t *FieldTable[P]) Lookup(name string) *Field[P] { return t.byName[name] }
