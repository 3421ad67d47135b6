package rulestore

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoRule is Patch's error for an id the store does not hold.
var ErrNoRule = errors.New("no such rule")

// Patch changes some fields of a rule through the store's normal write path
// — with Redis: the rule's hash, an entry in the change log and a publish,
// so every instance applies it within milliseconds and a restarted one
// reads it; without Redis: this process's memory — provided the fields
// named in expect still hold the expected values ("" = absent). It reports
// whether it wrote: false means another writer changed those fields first.
// The patched rule is validated before anything is written.
//
// With Redis only the patched fields are written to the hash (HSET). For a
// rule that lives in Redis that is the rule with those fields changed. For
// a rule declared only in the config, the hash then holds just the patched
// fields, which take effect where the store overlays a partial hash over the
// static rule; where it does not, the partial hash is rejected and the
// static rule stays in force.
func (a *App) Patch(ctx context.Context, k Kind, id string, expect, patch Fields) (bool, error) {
	cur := a.Lookup(k, id)
	if cur == nil {
		return false, fmt.Errorf("%s rule %q: %w", k, id, ErrNoRule)
	}
	for name, want := range expect {
		if cur.Fields[name] != want {
			return false, nil
		}
	}
	merged := make(Fields, len(cur.Fields)+len(patch))
	for name, v := range cur.Fields {
		merged[name] = v
	}
	for name, v := range patch {
		merged[name] = v
	}
	value, err := Parse(k, id, merged)
	if err == nil {
		err = a.checkAmong(k, id, value)
	}
	if err != nil {
		EmitRejected(k, id, "admin_api", err)
		return false, err
	}

	return a.source.Patch(ctx, PatchRequest{Kind: k, ID: id, Expect: expect, Patch: patch, Merged: merged, Value: value,
		Current: cur, Static: a.static[k][id]})
}
