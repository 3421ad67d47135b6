package circuitbreaker

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// The field table is the one list of the rule's fields: the reference table
// of docs/circuitbreaker.md shows its rows (name, syntax, default) in its
// order, and the typed spec has exactly its names.
func TestFieldTableMatchesTheDocsAndTheSpec(t *testing.T) {
	doc, err := os.ReadFile("../docs/circuitbreaker.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Rule fields\n")
	if !ok {
		t.Fatal("docs/circuitbreaker.md has no Rule fields section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows [][3]string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		rows = append(rows, [3]string{strings.Trim(strings.TrimSpace(cells[0]), "`"), cells[1], cells[2]})
	}
	var want [][3]string
	var names []string
	for _, f := range fields {
		want = append(want, [3]string{f.name, f.syntax, f.def})
		names = append(names, f.name)
	}
	if !slices.Equal(rows, want) {
		t.Errorf("docs/circuitbreaker.md's Rule fields table (name, syntax, default):\n%q\nthe field table (fields.go):\n%q", rows, want)
	}
	spec := rulestore.SpecFieldNames(rulestore.CircuitBreaker)
	spec = slices.DeleteFunc(spec, func(n string) bool { return n == "id" }) // an inline rule's name, not a field
	slices.Sort(spec)
	slices.Sort(names)
	if !slices.Equal(spec, names) {
		t.Errorf("CircuitBreakerSpec fields %v, field table %v", spec, names)
	}
}
