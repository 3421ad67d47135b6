// Package syntax owns the value syntax that every rule kind's fields
// share, so a number, a duration, a boolean, a status or a header name is
// read and documented the same way in all three handlers:
//
//   - bounded numbers and their ranges in errors and in the docs' tables
//     (numbers.go);
//   - durations with a unit, and the Duration type that JSON shows as a
//     Go duration string (duration.go);
//   - booleans, response statuses and header names (syntax.go).
//
// It is plain Go with no state: the handlers' field parsers and the
// rulestore's typed specs both call it.
package syntax
