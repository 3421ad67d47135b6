// Package rawfields holds a rule's raw fields as every source gives them:
// the same names and syntax in the Caddyfile, in JSON and in a Redis hash.
// It knows nothing of rule kinds or of the store; package rulestore names
// its types (rulestore.Fields, rulestore.FieldError) and parses fields by
// kind.
//
// It owns:
//
//   - the fields' map, read from JSON strings, numbers and booleans alike,
//     their sorted names, digest and equality (fields.go);
//   - the error that names the field at fault, and the clipping of
//     untrusted text in messages (errors.go);
//   - the "did you mean" hint: the known name nearest to a misspelled one
//     (suggest.go).
package rawfields
