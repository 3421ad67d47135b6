package rulestore

import (
	"context"
)

// lacking names the live instances that do not declare rule id while some
// live instance (this one included) does: there an overlay written for it
// is not used. Nil when every live instance declares it, or none does,
// or without Redis.
func (a *App) lacking(ctx context.Context, k Kind, id string) []string {
	if a.redis == nil {
		return nil
	}
	lacking, err := a.redis.FleetDeclares(ctx)
	if err != nil {
		return nil
	}
	return lacking(k, id)
}

// markLacking sets NotDeclaredOn on the objects an apply writes, from one
// read of the fleet's declarations.
func (a *App) markLacking(ctx context.Context, objs []ApplyObject) {
	if a.redis == nil {
		return
	}
	var lacking func(Kind, string) []string
	for i, o := range objs {
		if o.raw == nil || o.Result == ApplyUnchanged {
			continue
		}
		if lacking == nil {
			var err error
			if lacking, err = a.redis.FleetDeclares(ctx); err != nil {
				return
			}
		}
		objs[i].NotDeclaredOn = lacking(o.kind, o.ID)
	}
}
