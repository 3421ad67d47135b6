package rulestore

import (
	"context"

	"github.com/sluicegw/sluice/rulestore/status"
)

// InstanceVerdict is one instance's verdict on a rule as GET
// .../{kind}/{id}/verdicts shows it (status.InstanceVerdict).
type InstanceVerdict = status.InstanceVerdict

// VerdictsView is GET .../{kind}/{id}/verdicts (status.VerdictsView).
type VerdictsView = status.VerdictsView

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
