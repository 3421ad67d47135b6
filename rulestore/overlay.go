package rulestore

import (
	"sync/atomic"
)

// Overlay semantics, the contract between the config and Redis (or the
// admin API's memory without Redis):
//
//   - A rule declared only in the config is used as declared.
//   - A rule held only in Redis must be complete: it is validated alone.
//   - A Redis hash for an id that is also declared in the config overlays it
//     field by field: the Redis fields win, the config's fields fill in the
//     rest. `HSET gray:rule:<id> weight 0` is therefore a whole, valid change
//     of a Caddyfile-declared rule, and DEL of the hash restores it as
//     declared.
//
// The Redis layer keeps the raw hash of each id (so a change is detected by
// comparing the raw fields). Each config generation resolves the overlays of
// its own static rules once per change and caches the result, so a lookup
// stays a map read and an atomic load, without allocation.

// MergeFields returns base overlaid by over: over's fields win.
func MergeFields(base, over Fields) Fields {
	out := make(Fields, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// overlaySlot caches, for one static id of one config generation, the rule
// its current overlay resolves to.
type overlaySlot struct{ p atomic.Pointer[overlaid] }

type overlaid struct {
	from *Rule // the raw Redis (or memory) rule it was built from
	rule *Rule // the effective rule
}

// ParseOver validates raw fields for id as the overlay of the config's rule
// st (nil: the raw fields must be a complete rule). It returns the typed
// value and the effective fields.
func ParseOver(k Kind, id string, st *Rule, raw Fields) (any, Fields, error) {
	f := raw
	if st != nil {
		f = MergeFields(st.Fields, raw)
	}
	v, err := Parse(k, id, f)
	return v, f, err
}

// effective resolves a raw overlay rule r (from Redis or memory) against
// this generation's static rule of the same id.
func (a *App) effective(k Kind, id string, r *Rule) *Rule {
	st := a.static[k][id]
	if st == nil {
		if r.Partial {
			// Validated as an overlay of a static rule this config no
			// longer declares: incomplete on its own, so not in force.
			return nil
		}
		return r
	}
	slot := a.overlays[k][id]
	if c := slot.p.Load(); c != nil && c.from == r {
		return c.rule
	}
	out := st // the overlay does not fit this config's rule: keep the rule as declared
	if v, f, err := ParseOver(k, id, st, r.Fields); err == nil {
		out = &Rule{Kind: k, ID: id, Fields: f, Value: v, Source: r.Source, Overlay: r.Fields}
	}
	slot.p.Store(&overlaid{from: r, rule: out})
	return out
}

// overlayLayer is the layer over the static rules: Redis, or memory.
func (a *App) overlayLayer() *Layer {
	if a.source == nil { // an App built without Provision (tests)
		return NewLayer()
	}
	return a.source.Layer()
}

// Static returns the rule of kind k declared in the config, or nil.
func (a *App) Static(k Kind, id string) *Rule {
	return ByKind(a.static, k)[id]
}

// StaticRules are the rules of kind k declared in the config, by id; the
// map is the app's own: read it, never change it.
func (a *App) StaticRules(k Kind) map[string]*Rule { return ByKind(a.static, k) }
