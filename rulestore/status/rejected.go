package status

import (
	"time"

	"github.com/sluicegw/sluice/rulestore/rawfields"
)

// RejectedView is the value stored for a rule that this instance rejected
// (the rule in force is the last good version): GET shows it beside the
// rule, and its version is the ETag a write that replaces it must match.
type RejectedView struct {
	// Version of the stored fields.
	Version string `json:"version"`
	// Fields stored in Redis; omitted when over the size limit.
	Fields rawfields.Fields `json:"fields,omitempty"`
	// Field at fault, as in the verdict.
	Field string `json:"field,omitempty"`
	// Reason says why the version was rejected, as in the verdict.
	Reason string `json:"reason"`
	// Since when the stored value is rejected.
	Since time.Time `json:"since"`
}
