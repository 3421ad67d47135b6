package handlerkit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/sluicegw/sluice/caddyfile" // the rulestore global option
	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// note_kind is a rule kind as a handler package declares one, with a
// limit and ttl, the field TestAddingAFieldIsOneRow adds. Adding ttl took
// its row in noteFields, its Spec field (RegisterFields refuses a table
// and a Spec that disagree), the line of parse that uses it, and its row
// in testdata/note_kind.md (CheckDocs refuses a table the docs do not
// show).
var noteKind = rulestore.RegisterKind(rulestore.KindInfo{Name: "note_kind", NewSpec: func() rulestore.Spec { return new(noteSpec) }})

// noteSpec is a note_kind rule as JSON shows it.
type noteSpec struct {
	// Limit is how many.
	Limit *int64 `json:"limit,omitempty"`
	// TTL is how long a note lasts.
	TTL *syntax.Duration `json:"ttl,omitempty"`
}

func (*noteSpec) Kind() rulestore.Kind { return noteKind }

// note is a parsed note_kind rule.
type note struct {
	limit int64
	ttl   time.Duration
}

type noteParse struct {
	handlerkit.FieldReader
	n *note
}

var noteFields = handlerkit.NewFieldTable(
	handlerkit.WholeRow("limit", "required", 1, 1000, "", func(p *noteParse, n int64) { p.n.limit = n }),
	handlerkit.DurationRow("ttl", "`1m`", time.Second, time.Hour, "", func(p *noteParse, d time.Duration) { p.n.ttl = d }),
)

func parseNote(_ string, f rulestore.Fields) (*note, error) {
	p := &noteParse{FieldReader: handlerkit.FieldReader{Fields: f}, n: &note{ttl: time.Minute}}
	if err := noteFields.ReadEach(p, &p.FieldReader, func(name string) error {
		return f.Errorf(name, "unknown field")
	}); err != nil {
		return nil, err
	}
	if p.n.limit == 0 {
		return nil, f.Errorf("limit", "required")
	}
	return p.n, nil
}

func init() { handlerkit.RegisterRules(noteKind, noteFields, parseNote) }

// TestAddingAFieldIsOneRow: ttl, declared by its row (and used by its
// parse), is read from Redis fields, JSON and the Caddyfile, refused
// outside its range naming it, and held to the docs' table.
func TestAddingAFieldIsOneRow(t *testing.T) {
	// Redis fields (and the admin API, which takes the same).
	v, err := rulestore.Parse(noteKind, "a", rulestore.Fields{"limit": "5", "ttl": "90s"})
	if n, ok := v.(*note); err != nil || !ok || n.ttl != 90*time.Second {
		t.Fatalf("limit 5, ttl 90s: %#v, %v", v, err)
	}
	// Its range, from the row's Bounds.
	for _, row := range rulestore.KindFields(noteKind) {
		for _, x := range row.Bounds.Extremes() {
			if _, err := rulestore.Parse(noteKind, "a", rulestore.Fields{"limit": "5", row.Name: x}); err != nil {
				t.Errorf("%s %s refused: %v", row.Name, x, err)
			}
		}
		for _, x := range row.Bounds.Outside() {
			if _, err := rulestore.Parse(noteKind, "a", rulestore.Fields{"limit": "5", row.Name: x}); err == nil || !strings.Contains(err.Error(), "field "+row.Name) {
				t.Errorf("%s %s: %v, want an error naming %s", row.Name, x, err, row.Name)
			}
		}
	}
	// JSON config and the Caddyfile.
	config := func(ttl string) string {
		return fmt.Sprintf(`{"apps": {"rulestore": {"rules": {"note_kind": {"a": {"limit": 5, "ttl": %q}}}}}}`, ttl)
	}
	caddyfile := func(ttl string) string {
		return "{\n\trulestore {\n\t\tnote_kind a {\n\t\t\tlimit 5\n\t\t\tttl " + ttl + "\n\t\t}\n\t}\n}\n"
	}
	if err := testcaddy.ValidateJSON([]byte(config("90s"))); err != nil {
		t.Errorf("JSON with ttl 90s: %v", err)
	}
	if err := testcaddy.ValidateJSON([]byte(config("2h"))); err == nil || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("JSON with ttl 2h: %v, want an error naming ttl", err)
	}
	if err := testcaddy.Validate(caddyfile("90s")); err != nil {
		t.Errorf("Caddyfile with ttl 90s: %v", err)
	}
	if err := testcaddy.Validate(caddyfile("2h")); err == nil || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("Caddyfile with ttl 2h: %v, want an error naming ttl", err)
	}
	// The docs, the spec, the default, and that the parser reads it.
	fieldtable.CheckDocs(t, "testdata/note_kind.md", "## Fields", noteKind, fieldtable.RowsOf(noteFields))
	fieldtable.CheckDefaults(t, noteKind, rulestore.Fields{"limit": "5"}, nil)
	fieldtable.CheckEveryRowRead(t, noteKind, rulestore.Fields{"limit": "5"})
}
