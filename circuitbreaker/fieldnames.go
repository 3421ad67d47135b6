package circuitbreaker

import (
	"strings"

	"github.com/sluicegw/sluice/rulestore"
)

// The rule's field names, for "did you mean" on a misspelled one.
func init() { rulestore.RegisterFieldNames(rulestore.CircuitBreaker, ruleFieldNames()...) }

func ruleFieldNames() []string { return strings.Split(fieldNames, ", ") }

// directiveNames are what a circuitbreaker block accepts: a rule or route,
// or the fields of an inline rule (header is among them).
func directiveNames() []string { return append([]string{"rule", "route"}, ruleFieldNames()...) }
