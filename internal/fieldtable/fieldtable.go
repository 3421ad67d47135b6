// Package fieldtable holds a rule kind's field table (the rows its parser
// reads the fields by) to what the users read: the reference table of the
// kind's page in docs/, the typed spec of rulestore, and the defaults the
// parser gives. Each handler's fields_test.go calls it with its rows.
package fieldtable

import (
	"errors"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// Row is a field table row as the docs show it: name, Syntax, Default.
type Row struct{ Name, Syntax, Default string }

// RowsOf are a kind's field table rows as the docs show them.
func RowsOf[P any](t *handlerkit.FieldTable[P]) []Row {
	var rows []Row
	for _, f := range t.Rows() {
		rows = append(rows, Row{Name: f.Name, Syntax: f.Syntax, Default: f.Default})
	}
	return rows
}

// CheckDocs checks that the table under heading (the whole "## ..." line)
// of doc (a path) shows
// rows, in their order (every field documented, none stale, syntax and
// default agreeing), and that kind's typed spec has exactly their names.
func CheckDocs(t *testing.T, doc, heading string, kind rulestore.Kind, rows []Row) {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", doc, heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var got []Row
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		got = append(got, Row{strings.Trim(strings.TrimSpace(cells[0]), "`"), cells[1], cells[2]})
	}
	if !slices.Equal(got, rows) {
		t.Errorf("%s's %q table (name, syntax, default):\n%q\nthe field table (fields.go):\n%q", doc, heading, got, rows)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	spec := rulestore.SpecFieldNames(kind)
	spec = slices.DeleteFunc(spec, func(n string) bool { return n == "id" }) // an inline rule's name, not a field
	slices.Sort(spec)
	slices.Sort(names)
	if !slices.Equal(spec, names) {
		t.Errorf("%s spec fields %v, field table %v", kind, spec, names)
	}
}

// literalDefault is a Default that is one value in the rule's syntax,
// maybe followed by a remark: `429`, `0` (no cap), `100` (calls), when...
var literalDefault = regexp.MustCompile("^`([^`]+)`(?:[ ,].*)?$")

// RuleFor is a rule for trying row: base (the kind's least rule) with the
// fields the row Needs to apply; a Need of "" leaves that field out
// (quota: no qps).
func RuleFor(base rulestore.Fields, row rulestore.FieldInfo) rulestore.Fields {
	f := maps.Clone(base)
	if f == nil {
		f = rulestore.Fields{}
	}
	for k, v := range row.Needs {
		if v == "" {
			delete(f, k)
		} else {
			f[k] = v
		}
	}
	return f
}

// rows are kind's field table as its handler registered it.
func rows(t *testing.T, kind rulestore.Kind) []rulestore.FieldInfo {
	t.Helper()
	rows := rulestore.KindFields(kind)
	if len(rows) == 0 {
		t.Fatalf("%s has no field table registered (handlerkit.RegisterRules)", kind)
	}
	return rows
}

// CheckDefaults checks that each row whose Default is a literal value is
// the parser's default: the rule parsed with the field set to it equals
// the rule parsed without it. base is the kind's least rule, to which
// each row's Needs are added; not lists the rows whose Default is a
// formula or whose giving changes the rule otherwise, with why.
func CheckDefaults(t *testing.T, kind rulestore.Kind, base rulestore.Fields, not map[string]string) {
	t.Helper()
	checked := 0
	for _, r := range rows(t, kind) {
		m := literalDefault.FindStringSubmatch(r.Default)
		if m == nil || not[r.Name] != "" {
			continue
		}
		without, with := RuleFor(base, r), RuleFor(base, r)
		with[r.Name] = m[1]
		a, err := rulestore.Parse(kind, "r", without)
		if err != nil {
			t.Errorf("%s: the rule without it: %v", r.Name, err)
			continue
		}
		b, err := rulestore.Parse(kind, "r", with)
		if err != nil {
			t.Errorf("%s %s (its documented default): %v", r.Name, m[1], err)
			continue
		}
		if d := differing(a, b); len(d) > 0 {
			t.Errorf("%s %s (its documented default) gives another rule than leaving it out: %s differ", r.Name, m[1], strings.Join(d, ", "))
		}
		checked++
	}
	if checked == 0 {
		t.Error("no literal default checked")
	}
	t.Logf("%d literal defaults checked", checked)
}

// probe is a value no field takes as it is: a field that is read either
// refuses it, naming the field, or keeps it (a body, a key).
const probe = "\x7f?probe"

// CheckEveryRowRead checks that the parser reads every row of kind's
// table: a row the unknown-field check lets through but no step of the
// parser reads would take any value and do nothing. The rule for each
// row (base and the row's Needs) with the row set to a probe value must
// be refused naming the row, or parse to another rule than without it.
func CheckEveryRowRead(t *testing.T, kind rulestore.Kind, base rulestore.Fields) {
	t.Helper()
	for _, r := range rows(t, kind) {
		with := RuleFor(base, r)
		with[r.Name] = probe
		got, err := rulestore.Parse(kind, "r", with)
		if err != nil {
			if fe, ok := errors.AsType[*rulestore.FieldError](err); !ok || fe.Field != r.Name {
				t.Errorf("%s %q: refused, but not naming %s: %v", r.Name, probe, r.Name, err)
			}
			continue
		}
		without, err := rulestore.Parse(kind, "r", RuleFor(base, r))
		if err != nil {
			t.Errorf("%s: the rule without it: %v", r.Name, err)
			continue
		}
		if len(differing(without, got)) == 0 {
			t.Errorf("%s %q: taken, and the rule is the same as without it: no step of the parser reads %s", r.Name, probe, r.Name)
		}
	}
}

// differing names the fields in which two rules (pointers to structs of
// one type) differ.
func differing(a, b any) []string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	var d []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(field(va, i), field(vb, i)) {
			d = append(d, va.Type().Field(i).Name)
		}
	}
	return d
}

// field is a struct's i-th field, exported or not (v is addressable).
func field(v reflect.Value, i int) any {
	f := v.Field(i)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
}
