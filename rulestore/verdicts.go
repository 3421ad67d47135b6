package rulestore

import (
	"context"
)

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

// Verdicts reads the stored version of a rule and every instance's
// verdict on it, with its liveness, sorted by instance.
func (a *App) Verdicts(ctx context.Context, k Kind, id string) (VerdictsView, error) {
	if a.redis == nil {
		return VerdictsView{Version: StoredVersion(a.Static(k, id), nil), Verdicts: []InstanceVerdict{}}, nil
	}
	cur, out, err := a.redis.Verdicts(ctx, k, id)
	if err != nil {
		return VerdictsView{}, err
	}
	return VerdictsView{Version: StoredVersion(a.Static(k, id), cur), Verdicts: out}, nil
}
