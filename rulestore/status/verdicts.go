package status

import (
	"time"

	"github.com/sluicegw/sluice/rulestore/rawfields"
)

// Verdict is one instance's answer to one version of a rule, as written to
// the status hash (JSON in the field named after the instance).
type Verdict struct {
	// State is accepted, rejected or deleted.
	State string `json:"state"`
	// Version is the version of the raw Redis fields answered.
	Version string `json:"version,omitempty"`
	// Field is the field at fault (rejected).
	Field string `json:"field,omitempty"`
	// Error says why the version was rejected.
	Error string `json:"error,omitempty"`
	// At is when the instance answered, RFC 3339, UTC.
	At string `json:"at"`
	// Heartbeat is the instance's member in gateway:instances: while its
	// score (expiry, unix ms) is ahead, the instance is live; else the
	// verdict is a stopped instance's, not a lagging one.
	Heartbeat string `json:"heartbeat,omitempty"`
}

// InvalidRule is a rule id that is not in force as its writer or a handler
// expects: rejected (the last version in Redis failed validation) or missing
// (a handler refers to it but the store holds no such rule).
type InvalidRule struct {
	// Kind is the rule's kind: rate_limit, circuit_breaker, gray, binding or
	// one another module registers.
	Kind string `json:"kind"`
	// ID is the rule's id (a route name for a binding).
	ID string `json:"id"`
	// Problem is rejected or missing.
	Problem string `json:"problem"`
	// Version is the rejected version of the raw Redis fields.
	Version string `json:"version,omitempty"`
	// Field is the field at fault (rejected).
	Field string `json:"field,omitempty"`
	// Reason says why: the validation error, or who refers to the missing rule.
	Reason string `json:"reason"`
	// Since is when the problem was first seen.
	Since time.Time `json:"since"`
	// Stored are the rejected raw fields as Redis holds them (clipped).
	Stored rawfields.Fields `json:"stored,omitempty"`
}

// InstanceVerdict is one instance's verdict on a rule as GET
// .../{kind}/{id}/verdicts shows it: the verdict, and whether the instance
// is live (its heartbeat is current) or stopped. A stopped instance's
// verdict is shown as such, never waited on, for stoppedShown after its
// heartbeat expired; then the read that finds it deletes it.
type InstanceVerdict struct {
	// Instance names the instance: host:pid.
	Instance string `json:"instance"`
	// Verdict is the instance's answer to the rule's last version it read.
	Verdict
	// Live is true while the instance's heartbeat is current.
	Live bool `json:"live"`
	// Instance state: live, stopped, or unknown for a verdict without a
	// heartbeat (written by an older release).
	InstanceState string `json:"instance_state"`
}

// VerdictsView is GET .../{kind}/{id}/verdicts: the version stored in
// Redis now, and every instance's verdict. A live instance that has not
// written one yet is listed with state "none".
type VerdictsView struct {
	// Version is the version of the fields stored in Redis now.
	Version string `json:"version"`
	// Verdicts are every instance's verdicts, sorted by instance.
	Verdicts []InstanceVerdict `json:"verdicts"`
}
