package grayroute

import "github.com/sluicegw/sluice/rulestore"

// ruleFieldNames are a gray rule's fields, for "did you mean" on a
// misspelled one.
var ruleFieldNames = []string{"match_tag", "match_value", "match_source", "target_version", "weight",
	"fallback_version", "hash_key", "ramp", "fallback_on_open"}

func init() { rulestore.RegisterFieldNames(rulestore.Gray, ruleFieldNames...) }

// directiveNames are the grayroute block's sub-directives.
var directiveNames = []string{"rule", "route", "gray", "default_version", "header"}
