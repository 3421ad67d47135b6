package handlerkit

import (
	"strings"

	"github.com/sluicegw/sluice/rulestore"
)

// FieldReader is what every kind's parse state holds (each embeds it
// beside its rule): the rule's fields, and the name of the field whose
// row is reading it, which that row's errors name.
type FieldReader struct {
	Fields rulestore.Fields
	Name   string
}

// Errorf is an error in the field being read.
func (r *FieldReader) Errorf(format string, args ...any) error {
	return r.Fields.Errorf(r.Name, format, args...)
}

// Named is err as an error in the field being read; nil stays nil.
func (r *FieldReader) Named(err error) error {
	if err != nil {
		return r.Errorf("%v", err)
	}
	return nil
}

// Get returns a field's value, trimmed, and whether it is given.
func (r *FieldReader) Get(name string) (string, bool) {
	v, ok := r.Fields[name]
	return strings.TrimSpace(v), ok
}

// ReadEach reads every given field by its row, in name order, with p
// (whose FieldReader is r); unknown makes the error for a field without a
// row.
func (t *FieldTable[P]) ReadEach(p P, r *FieldReader, unknown func(name string) error) error {
	for _, name := range r.Fields.Names() {
		row := t.Lookup(name)
		if row == nil {
			return unknown(name)
		}
		r.Name = name
		v, _ := r.Get(name)
		if err := row.Parse(p, v); err != nil {
			return err
		}
	}
	return nil
}
