package handlerkit

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// ReadEach reads every given field by its row, trimmed, with the reader
// naming the field whose row fails; a field without a row is unknown's.
func TestReadEachNamesTheFieldItReads(t *testing.T) {
	type state struct {
		FieldReader
		got []string
	}
	tab := NewFieldTable(
		Row("a", "", "", func(p *state, v string) error { p.got = append(p.got, "a="+v); return nil }),
		Row("b", "", "", func(p *state, v string) error {
			if v != "ok" {
				return p.Named(errors.New("want ok"))
			}
			p.got = append(p.got, "b="+v)
			return nil
		}),
	)
	unknown := func(name string) error { return errors.New("unknown " + name) }

	p := &state{FieldReader: FieldReader{Fields: rulestore.Fields{"b": " ok ", "a": "1"}}}
	if err := tab.ReadEach(p, &p.FieldReader, unknown); err != nil || strings.Join(p.got, " ") != "a=1 b=ok" {
		t.Fatalf("read %v, %v; want a=1 b=ok in name order, trimmed", p.got, err)
	}

	p = &state{FieldReader: FieldReader{Fields: rulestore.Fields{"a": "1", "b": "no"}}}
	var fe *rulestore.FieldError
	if err := tab.ReadEach(p, &p.FieldReader, unknown); !errors.As(err, &fe) || fe.Field != "b" || fe.Value != "no" {
		t.Fatalf("error %v, want a field error naming b=no", err)
	}

	p = &state{FieldReader: FieldReader{Fields: rulestore.Fields{"c": "1"}}}
	if err := tab.ReadEach(p, &p.FieldReader, unknown); err == nil || err.Error() != "unknown c" {
		t.Fatalf("error %v, want unknown's for c", err)
	}
	if err := p.Named(nil); err != nil {
		t.Fatalf("Named(nil) = %v", err)
	}
}
