package rulestore

import (
	"context"
	"encoding/json"
	"sort"
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
	out := []InstanceVerdict{}
	if a.source == nil {
		return VerdictsView{Version: storedVersion(a.Static(k, id), nil), Verdicts: out}, nil
	}
	s := a.source
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	stored, err := s.client.HGetAll(ctx, s.names.RuleKey(k, id)).Result()
	if err != nil && !isWrongType(err) {
		return VerdictsView{}, err
	}
	var cur Fields
	if len(stored) > 0 {
		cur = Fields(stored)
	}
	raw, err := s.client.HGetAll(ctx, s.names.StatusKey(k, id)).Result()
	if err != nil {
		return VerdictsView{}, err
	}
	members, err := s.members(ctx)
	if err != nil {
		return VerdictsView{}, err
	}
	seen := map[string]bool{}
	var gone []string
	for who, js := range raw {
		var v Verdict
		if json.Unmarshal([]byte(js), &v) != nil {
			continue
		}
		live, known := members[v.Heartbeat]
		if v.Heartbeat != "" && !known {
			gone = append(gone, who) // stopped more than stoppedShown ago
			continue
		}
		seen[v.Heartbeat] = true
		iv := InstanceVerdict{Instance: who, Verdict: v, Live: live, InstanceState: "stopped"}
		switch {
		case v.Heartbeat == "":
			iv.InstanceState = "unknown"
		case iv.Live:
			iv.InstanceState = "live"
		}
		out = append(out, iv)
	}
	if len(gone) > 0 {
		// A row is written only by its own instance, which is gone: if the
		// prune fails, the next read prunes it.
		s.client.HDel(ctx, s.names.StatusKey(k, id), gone...)
	}
	for m, live := range members {
		if live && !seen[m] {
			out = append(out, InstanceVerdict{Instance: "heartbeat " + m, Verdict: Verdict{State: "none", Heartbeat: m},
				Live: true, InstanceState: "live"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Instance < out[j].Instance })
	return VerdictsView{Version: storedVersion(a.Static(k, id), cur), Verdicts: out}, nil
}
