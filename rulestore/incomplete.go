package rulestore

import (
	"errors"
)

// IncompleteHere reports whether err only says that a field the stored
// fields f do not set is missing or wrong: f is an overlay of a rule
// declared elsewhere, not a bad value.
func IncompleteHere(f Fields, err error) bool {
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field == "" {
		return false
	}
	_, set := f[fe.Field]
	return !set
}
