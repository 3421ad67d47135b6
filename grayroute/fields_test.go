package grayroute

import (
	"slices"
	"testing"

	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/rulestore"
)

// The field table is the one list of the rule's fields: the reference table
// of docs/grayroute.md shows its rows (name, syntax, default) in its order,
// the typed spec has exactly its names, its literal defaults are the
// parser's, and the parser reads every row.
func TestFieldTableMatchesTheDocsTheSpecAndTheParser(t *testing.T) {
	rows := fieldtable.RowsOf(fields)
	fieldtable.CheckDocs(t, "../docs/grayroute.md", "## Gray rule fields", rulestore.Gray, rows)
	base := rulestore.Fields{"target_version": "v2"}
	fieldtable.CheckDefaults(t, rulestore.Gray, base, nil)
	fieldtable.CheckEveryRowRead(t, rulestore.Gray, base)

	// The rows that need analysis on are the ones finishAnalysis refuses
	// without it.
	var needAnalysis []string
	for _, f := range fields.Rows() {
		if f.Needs["analysis"] == "on" {
			needAnalysis = append(needAnalysis, f.Name)
		}
	}
	if !slices.Equal(needAnalysis, analysisSettings) {
		t.Errorf("rows needing analysis on %v, analysisSettings %v", needAnalysis, analysisSettings)
	}
}
