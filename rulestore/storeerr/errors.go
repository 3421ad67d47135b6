// Package storeerr holds the typed errors of the rule store: what a failed
// store call means to its caller, whatever the transport. The store
// answers in classes, never in HTTP statuses; the admin API
// (rulestore/admin) maps each class to its status. Package rulestore names
// them (rulestore.ErrorClass, rulestore.ErrConflict, ...).
//
// It owns:
//
//   - the classes of a store error, and the error that carries one
//     (errors.go);
//   - reading the class of an error, for a caller that maps them
//     (errors.go).
package storeerr

import (
	"errors"
	"fmt"
)

// ErrorClass is what a failed store call means to its caller, whatever
// the transport: a caller tests for one with errors.Is(err, ErrConflict).
// The store answers in classes, never in HTTP statuses; the admin API maps
// each class to its status (rulestore/admin).
type ErrorClass string

func (c ErrorClass) Error() string { return string(c) }

// The classes of a store error.
const (
	// ErrInvalid: the request or the rule it carries is wrong.
	ErrInvalid ErrorClass = "invalid"
	// ErrNotFound: the rule (or what the call names) does not exist.
	ErrNotFound ErrorClass = "not found"
	// ErrConflict: the state does not allow it now (a binding to rules
	// that do not exist, a rule that kept changing under the write).
	ErrConflict ErrorClass = "conflict"
	// ErrPreconditionFailed: an If-Match or an expected version does not
	// hold.
	ErrPreconditionFailed ErrorClass = "precondition failed"
	// ErrUnsupported: the store's backend cannot do it (an atomic apply on
	// Redis Cluster).
	ErrUnsupported ErrorClass = "unsupported"
	// ErrBackend: Redis failed or could not be reached.
	ErrBackend ErrorClass = "backend"
)

// ErrorClasses lists every class, for a caller that maps them all.
func ErrorClasses() []ErrorClass {
	return []ErrorClass{ErrInvalid, ErrNotFound, ErrConflict, ErrPreconditionFailed, ErrUnsupported, ErrBackend}
}

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
