package ratelimit

import "github.com/sluicegw/sluice/rulestore"

// knownFields are the rule's field names, those of its typed form
// (rulestore.RateLimitSpec); registered for "did you mean".
var knownFields = rulestore.SpecFieldNames(rulestore.RateLimit)

func init() { rulestore.RegisterFieldNames(rulestore.RateLimit, knownFields...) }
