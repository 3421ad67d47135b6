package rawfields

import "fmt"

// FieldError says which field of a rule is wrong and why.
type FieldError struct {
	Field  string
	Value  string
	Reason string
	err    error // the cause, if it is an error of its own (a *MissingError)
}

// Unwrap returns the cause, so errors.As finds a *MissingError.
func (e *FieldError) Unwrap() error { return e.err }

func (e *FieldError) Error() string {
	name := clip(e.Field)
	if name == "" {
		name = `""` // a hash or JSON object may hold an empty field name
	}
	if e.Value == "" {
		return fmt.Sprintf("field %s: %s", name, e.Reason)
	}
	return fmt.Sprintf("field %s=%q: %s", name, clip(e.Value), e.Reason)
}

// Caused is a FieldError on field whose reason is err, which errors.As
// and errors.Is find.
func Caused(field string, err error) *FieldError {
	return &FieldError{Field: field, Reason: err.Error(), err: err}
}

// clip shortens untrusted text for a log line.
func clip(s string) string { return Clip(s, 64) }

// Clip shortens untrusted text (from a request or from Redis) to n bytes
// for a log line or an error message, saying how long it was.
func Clip(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("%.*s… (%d bytes)", n, s, len(s))
	}
	return s
}
