package grayroute

import (
	"testing"

	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/rulestore"
)

// The field table is the one list of the rule's fields: the reference table
// of docs/grayroute.md shows its rows (name, syntax, default) in its order,
// the typed spec has exactly its names, and its literal defaults are the
// parser's.
func TestFieldTableMatchesTheDocsTheSpecAndTheParser(t *testing.T) {
	rows := fieldtable.RowsOf(fields)
	fieldtable.CheckDocs(t, "../docs/grayroute.md", "## Gray rule fields", rulestore.Gray, rows)

	base := func(name string) rulestore.Fields {
		f := rulestore.Fields{"target_version": "v2"}
		for _, n := range analysisSettings {
			if n == name {
				f["analysis"], f["fallback_version"], f["step_weight"] = "on", "v1", "10"
			}
		}
		return f
	}
	fieldtable.CheckDefaults(t, rows, func(f rulestore.Fields) (any, error) { return ParseRule("r", f) }, base, nil)
}
