package grayroute

import "github.com/sluicegw/sluice/rulestore"

// ruleFieldNames are a gray rule's fields, those of its typed form
// (rulestore.GraySpec), for the unknown-field message. The store suggests
// a misspelled one from the same Spec.
var ruleFieldNames = rulestore.SpecFieldNames(rulestore.Gray)
