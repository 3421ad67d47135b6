package rulestore

import "github.com/sluicegw/sluice/rulestore/rawfields"

// Fields are a rule's raw fields. They have the same names and syntax in the
// Caddyfile, in JSON and in the Redis hash, so a rule can be copied between
// the three unchanged (package rulestore/rawfields).
type Fields = rawfields.Fields

// FieldError says which field of a rule is wrong and why.
type FieldError = rawfields.FieldError
