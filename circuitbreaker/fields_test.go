package circuitbreaker

import (
	"testing"

	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/rulestore"
)

// The field table is the one list of the rule's fields: the reference table
// of docs/circuitbreaker.md shows its rows (name, syntax, default) in its
// order, the typed spec has exactly its names, and its literal defaults are
// the parser's.
func TestFieldTableMatchesTheDocsTheSpecAndTheParser(t *testing.T) {
	rows := fieldtable.RowsOf(fields)
	fieldtable.CheckDocs(t, "../docs/circuitbreaker.md", "## Rule fields", rulestore.CircuitBreaker, rows)

	rateTrigger := map[string]bool{"window": true, "min_requests": true}
	base := func(name string) rulestore.Fields {
		if rateTrigger[name] {
			return rulestore.Fields{"failure_rate": "50"}
		}
		return rulestore.Fields{}
	}
	fieldtable.CheckDefaults(t, rows, func(f rulestore.Fields) (any, error) { return ParseRule("r", f) }, base, nil)
}
