package handlerkit

// Field is one field of a rule kind: its name, its Syntax and Default as
// the kind's reference table in docs/ shows them (each handler's
// fields_test.go holds the two together), and how its value is read into
// the rule being parsed, P being the kind's parse state. A field that a
// step of the kind's ParseRule reads together with others has no Parse.
type Field[P any] struct {
	Name, Syntax, Default string
	Parse                 func(p P, v string) error
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

// Lookup is the named field, or nil.
func (t *FieldTable[P]) Lookup(name string) *Field[P] { return t.byName[name] }
