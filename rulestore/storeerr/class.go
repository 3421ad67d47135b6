// Package storeerr holds the typed errors of the rule store: what a failed
// store call means to its caller, whatever the transport. The store
// answers in classes, never in HTTP statuses; the admin API
// (rulestore/admin) maps each class to its status. Package rulestore names
// them (rulestore.ErrorClass, rulestore.ErrConflict, ...).
//
// It owns:
//
//   - the classes of a store error, and the list of them all (class.go);
//   - the error that carries a class, whose text is its cause's alone
//     (error.go);
//   - reading the class of an error, for a caller that maps them
//     (error.go).
package storeerr

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
