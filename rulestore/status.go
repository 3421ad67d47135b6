package rulestore

import (
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"time"
)

// InstanceName names this process in verdicts and history: host:pid.
func InstanceName() string { return instanceName }

// instanceName names this process in verdicts and history: host:pid.
var instanceName = func() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", h, os.Getpid())
}()

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
	Stored Fields `json:"stored,omitempty"`
}

// missingRef is a rule a handler asked for and did not find.
type missingRef struct {
	since    time.Time
	lastWarn atomic.Int64 // unix ns
}

// missingWarnEvery bounds the warnings for one missing id (with Redis; without
// Redis a missing id fails validation, so one warning is enough).
const missingWarnEvery = time.Minute

// WarnMissing records that a handler refers to a rule the store does not
// hold; requests pass through until it arrives. The id is listed as missing
// in /sluice/state and counted in sluice_rules_invalid, and logged at most
// once a minute.
func (a *App) WarnMissing(k Kind, id string) {
	a.warnMissing(k, id, "rule not found; requests pass through until it arrives")
}

// WarnMissingRefused is WarnMissing for a handler that refuses the
// requests meanwhile (on_missing_rule refuse).
func (a *App) WarnMissingRefused(k Kind, id string) {
	a.warnMissing(k, id, "rule not found; requests are refused (503) until it arrives")
}

// The warning itself, with its "did you mean" (a search of every id of
// the kind), is written by logMissing, off the request: a request through
// a binding that names a thousand ids not loaded yet only queues their
// warnings.
func (a *App) warnMissing(k Kind, id, msg string) {
	m := a.noteMissing(k, id)
	now := time.Now().UnixNano()
	last := m.lastWarn.Load()
	if last != 0 && (a.redis == nil || now-last < int64(missingWarnEvery)) {
		return
	}
	if m.lastWarn.CompareAndSwap(last, now) {
		select {
		case a.missingWarns <- missingWarn{k, id, msg, m.since}:
		default:
			m.lastWarn.Store(last) // queue full: a later request warns
		}
	}
}

// noteMissing lists a rule as missing (since now, if it was not already)
// without logging.
func (a *App) noteMissing(k Kind, id string) *missingRef {
	ref := RuleRef{k, id}
	v, ok := a.missing.Load(ref)
	if !ok {
		v, _ = a.missing.LoadOrStore(ref, &missingRef{since: time.Now().UTC()})
	}
	return v.(*missingRef)
}

// Invalid lists the rejected and missing rule ids, by kind then id.
func (a *App) Invalid() []InvalidRule {
	var out []InvalidRule
	if a.redis != nil {
		out = a.redis.Rejected()
	}
	a.missing.Range(func(key, value any) bool {
		ref := key.(RuleRef)
		if a.Lookup(ref.Kind, ref.ID) != nil {
			a.missing.Delete(key) // arrived since
			return true
		}
		out = append(out, InvalidRule{Kind: ref.Kind.String(), ID: ref.ID, Problem: "missing",
			Reason: "a handler refers to it; requests pass through unchecked until it exists",
			Since:  value.(*missingRef).since})
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	if out == nil {
		out = []InvalidRule{}
	}
	return out
}
