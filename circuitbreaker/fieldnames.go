package circuitbreaker

import (
	"strings"

	"github.com/sluicegw/sluice/rulestore"
)

// fieldNames lists the rule's fields, those of its typed form
// (rulestore.CircuitBreakerSpec), for the unknown-field message. The
// store suggests a misspelled one from the same Spec.
var fieldNames = strings.Join(rulestore.SpecFieldNames(rulestore.CircuitBreaker), ", ")
