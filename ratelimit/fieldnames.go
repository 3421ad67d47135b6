package ratelimit

import "github.com/sluicegw/sluice/rulestore"

// knownFields are the rule's field names, those of its typed form
// (rulestore.RateLimitSpec), for the unknown-field message. The store
// suggests a misspelled one from the same Spec.
var knownFields = rulestore.SpecFieldNames(rulestore.RateLimit)
