// Package kindtest shows that a rule kind defined outside the store works
// end to end: the kind below is registered here, as a plugin would, and
// nothing in rulestore names it.
package kindtest

import (
	"strconv"

	"github.com/sluicegw/sluice/rulestore"
)

// quotaNote is a toy kind with one field, registered from this package.
var quotaNote = rulestore.RegisterKind(rulestore.KindInfo{
	Name:    "quota_note",
	NewSpec: func() rulestore.Spec { return new(quotaNoteSpec) },
	Parse:   parseQuotaNote,
})

// quotaNoteSpec is the typed form of a quota_note rule.
type quotaNoteSpec struct {
	// Limit is a whole number above zero.
	Limit *int64 `json:"limit,omitempty"`
}

func (*quotaNoteSpec) Kind() rulestore.Kind { return quotaNote }

// parseQuotaNote validates a quota_note rule: limit is required and > 0.
func parseQuotaNote(_ string, f rulestore.Fields) (any, error) {
	for _, name := range f.Names() {
		if name != "limit" {
			return nil, f.Errorf(name, "unknown field (want limit)")
		}
	}
	n, err := strconv.ParseInt(f["limit"], 10, 64)
	if err != nil || n <= 0 {
		return nil, f.Errorf("limit", "want a whole number > 0")
	}
	return n, nil
}
