package ratelimit

import "github.com/sluicegw/sluice/rulestore"

// The rule's field names, for "did you mean" on a misspelled one.
func init() { rulestore.RegisterFieldNames(rulestore.RateLimit, knownFields...) }

// directiveNames are what a ratelimit block accepts: a rule or route, or the
// fields of an inline rule.
func directiveNames() []string { return append([]string{"rule", "route"}, knownFields...) }
