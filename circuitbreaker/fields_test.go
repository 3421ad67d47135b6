package circuitbreaker

import (
	"testing"

	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/rulestore"
)

// The field table is the one list of the rule's fields: the reference table
// of docs/circuitbreaker.md shows its rows (name, syntax, default) in its
// order, the typed spec has exactly its names, its literal defaults are
// the parser's, and the parser reads every row.
func TestFieldTableMatchesTheDocsTheSpecAndTheParser(t *testing.T) {
	rows := fieldtable.RowsOf(fields)
	fieldtable.CheckDocs(t, "../docs/circuitbreaker.md", "## Rule fields", rulestore.CircuitBreaker, rows)
	fieldtable.CheckDefaults(t, rulestore.CircuitBreaker, nil, nil)
	fieldtable.CheckEveryRowRead(t, rulestore.CircuitBreaker, nil)
}
