package circuitbreaker

import (
	"strings"

	"github.com/sluicegw/sluice/rulestore"
)

// fieldNames lists the rule's fields, those of its typed form
// (rulestore.CircuitBreakerSpec), for the unknown-field message.
var fieldNames = strings.Join(rulestore.SpecFieldNames(rulestore.CircuitBreaker), ", ")

// Registered for "did you mean" on a misspelled one.
func init() {
	rulestore.RegisterFieldNames(rulestore.CircuitBreaker, rulestore.SpecFieldNames(rulestore.CircuitBreaker)...)
}
