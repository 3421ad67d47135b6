package rulestore

import "github.com/sluicegw/sluice/rulestore/storeerr"

// ErrorClass is what a failed store call means to its caller, whatever
// the transport (storeerr.ErrorClass): a caller tests for one with
// errors.Is(err, ErrConflict); the admin API maps each to its status.
type ErrorClass = storeerr.ErrorClass

// Error is a failed store call: its class, and what went wrong.
type Error = storeerr.Error

// The classes of a store error (see storeerr).
const (
	ErrInvalid            = storeerr.ErrInvalid
	ErrNotFound           = storeerr.ErrNotFound
	ErrConflict           = storeerr.ErrConflict
	ErrPreconditionFailed = storeerr.ErrPreconditionFailed
	ErrUnsupported        = storeerr.ErrUnsupported
	ErrBackend            = storeerr.ErrBackend
)

// ErrorClasses lists every class, for a caller that maps them all.
func ErrorClasses() []ErrorClass { return storeerr.ErrorClasses() }

// Errorf is an *Error of class c whose text is the formatted message (%w
// wraps as fmt.Errorf does).
func Errorf(c ErrorClass, format string, args ...any) error {
	return storeerr.Errorf(c, format, args...)
}

// ClassOf is the class of err's outermost *Error, or "" for an error the
// store did not classify.
func ClassOf(err error) ErrorClass { return storeerr.ClassOf(err) }
