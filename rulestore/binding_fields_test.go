package rulestore_test

import (
	"testing"

	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/rulestore"
)

// The route binding's field table is the one list of its fields: the
// reference table of docs/rulestore.md shows its rows in its order, and
// the typed spec has exactly its names.
func TestBindingFieldTableMatchesTheDocsAndTheSpec(t *testing.T) {
	var rows []fieldtable.Row
	for _, r := range rulestore.BindingFieldRows() {
		rows = append(rows, fieldtable.Row{Name: r[0], Syntax: r[1], Default: r[2]})
	}
	fieldtable.CheckDocs(t, "../docs/rulestore.md", "## Route binding fields", rulestore.Binding, rows)
}
