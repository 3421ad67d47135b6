package ratelimit

import (
	"testing"

	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/rulestore"
)

// The field table is the one list of the rule's fields: the reference table
// of docs/ratelimit.md shows its rows (name, syntax, default) in its order,
// the typed spec has exactly its names, its literal defaults are the
// parser's, and the parser reads every row (those without a parse of their
// own in parseCalendar or parseCost).
func TestFieldTableMatchesTheDocsTheSpecAndTheParser(t *testing.T) {
	rows := fieldtable.RowsOf(fields)
	fieldtable.CheckDocs(t, "../docs/ratelimit.md", "## Rule fields", rulestore.RateLimit, rows)
	base := rulestore.Fields{"qps": "10"}
	fieldtable.CheckDefaults(t, rulestore.RateLimit, base, map[string]string{
		"burst": "a formula of qps",
		"cost":  "giving cost instead of requested_tokens names it in the errors (costField)",
	})
	fieldtable.CheckEveryRowRead(t, rulestore.RateLimit, base)
}
