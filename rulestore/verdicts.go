package rulestore

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
)

// InstanceVerdict is one instance's verdict on a rule as GET
// .../{kind}/{id}/verdicts shows it: the verdict, and whether the instance
// is live (its heartbeat is current) or stopped. A stopped instance's
// verdict is kept for the record but is never waited on.
type InstanceVerdict struct {
	Instance string `json:"instance"`
	Verdict
	// Live is true while the instance's heartbeat is current.
	Live bool `json:"live"`
	// Instance state: live, stopped, or unknown for a verdict without a
	// heartbeat (written by an older release).
	InstanceState string `json:"instance_state"`
}

// Verdicts reads every instance's verdict on a rule, with its liveness,
// sorted by instance.
func (a *App) Verdicts(ctx context.Context, k Kind, id string) ([]InstanceVerdict, error) {
	out := []InstanceVerdict{}
	if a.source == nil {
		return out, nil
	}
	s := a.source
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	raw, err := s.client.HGetAll(ctx, s.names.StatusKey(k, id)).Result()
	if err != nil {
		return nil, err
	}
	live, err := s.liveMembers(ctx)
	if err != nil {
		return nil, err
	}
	for who, js := range raw {
		var v Verdict
		if json.Unmarshal([]byte(js), &v) != nil {
			continue
		}
		iv := InstanceVerdict{Instance: who, Verdict: v, Live: live[v.Heartbeat], InstanceState: "stopped"}
		switch {
		case v.Heartbeat == "":
			iv.InstanceState = "unknown"
		case iv.Live:
			iv.InstanceState = "live"
		}
		out = append(out, iv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Instance < out[j].Instance })
	return out, nil
}

func (a *App) serveVerdicts(w http.ResponseWriter, r *http.Request, k Kind, id string) error {
	v, err := a.Verdicts(r.Context(), k, id)
	if err != nil {
		return apiError(http.StatusBadGateway, "reading verdicts from redis: %v", err)
	}
	return writeJSON(w, v)
}
