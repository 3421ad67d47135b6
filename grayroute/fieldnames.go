package grayroute

import "github.com/sluicegw/sluice/rulestore"

// ruleFieldNames are a gray rule's fields, those of its typed form
// (rulestore.GraySpec), for "did you mean" on a misspelled one.
var ruleFieldNames = rulestore.SpecFieldNames(rulestore.Gray)

func init() { rulestore.RegisterFieldNames(rulestore.Gray, ruleFieldNames...) }
