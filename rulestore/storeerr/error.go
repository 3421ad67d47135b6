package storeerr

import (
	"errors"
	"fmt"
)

// Error is a failed store call: its class, and what went wrong. Its text
// is Err's alone, so a class changes no message.
type Error struct {
	Class ErrorClass
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the error's class.
func (e *Error) Is(target error) bool { return target == e.Class }

// Errorf is an *Error of class c whose text is the formatted message (%w
// wraps as fmt.Errorf does).
func Errorf(c ErrorClass, format string, args ...any) error {
	return &Error{Class: c, Err: fmt.Errorf(format, args...)}
}

// ClassOf is the class of err's outermost *Error, or "" for an error the
// store did not classify.
func ClassOf(err error) ErrorClass {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ""
}
