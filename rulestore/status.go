package rulestore

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/sluicegw/sluice/rulestore/status"
)

// InstanceName names this process in verdicts and history: host:pid.
func InstanceName() string { return instanceName }

// instanceName names this process in verdicts and history: host:pid.
var instanceName = func() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", h, os.Getpid())
}()

// Verdict is one instance's answer to one version of a rule
// (status.Verdict).
type Verdict = status.Verdict

// InvalidRule is a rule id that is not in force as its writer or a handler
// expects (status.InvalidRule).
type InvalidRule = status.InvalidRule

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
// warnings. With Redis the rule may arrive: it is warned about again,
// once a minute at most.
func (a *App) warnMissing(k Kind, id, msg string) {
	a.missing.Warn(RuleRef{k, id}, msg, a.redis != nil)
}

// Invalid lists the rejected and missing rule ids, by kind then id.
func (a *App) Invalid() []InvalidRule {
	var out []InvalidRule
	if a.redis != nil {
		out = a.redis.Rejected()
	}
	a.missing.Range(a.holds, func(ref RuleRef, since time.Time) {
		out = append(out, InvalidRule{Kind: ref.Kind.String(), ID: ref.ID, Problem: "missing",
			Reason: "a handler refers to it; requests pass through unchecked until it exists",
			Since:  since})
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
