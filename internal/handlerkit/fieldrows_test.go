package handlerkit

import (
	"errors"
	"testing"
)

func TestFieldTableKeepsOrderAndFindsByName(t *testing.T) {
	var got []string
	set := func(p *[]string, v string) error { *p = append(*p, v); return nil }
	tab := NewFieldTable(
		Row("b", "int", "`1`", set),
		Row("a", "name", "none", func(*[]string, string) error { return errors.New("bad") }),
	)
	if rows := tab.Rows(); len(rows) != 2 || rows[0].Name != "b" || rows[1].Name != "a" {
		t.Fatalf("rows %+v, want b then a", rows)
	}
	if err := tab.Lookup("b").Parse(&got, "7"); err != nil || len(got) != 1 || got[0] != "7" {
		t.Fatalf("b parsed %v, %v", got, err)
	}
	if tab.Lookup("a").Parse(&got, "x") == nil {
		t.Fatal("a's parse error lost")
	}
	if tab.Lookup("c") != nil {
		t.Fatal("an unknown name found")
	}
}

func TestFieldTableRefusesANameTwice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a name given twice")
		}
	}()
	NewFieldTable(Row[*int]("a", "", "", nil), Row[*int]("a", "", "", nil))
}
