package rulestore

import "sync/atomic"

// Handle is one rule id held by a hot path: Rule returns what Lookup would,
// but while the store's layer is unchanged it reads the rule's slot directly
// (two atomic loads) instead of looking the id up in maps. A new layer (an
// id added or deleted) re-resolves the handle once; an updated rule is seen
// at once, since updates swap the pointer in the slot.
type Handle struct {
	a   *App
	k   Kind
	id  string
	res atomic.Pointer[resolution]
}

// resolution is a handle resolved against one layer.
type resolution struct {
	layer *layer
	slot  *slot // the id's slot in layer; nil if the layer lacks the id
	rule  *Rule // without a slot: the static rule, or nil
}

// Handle returns a handle on the rule of kind k with this id, present or not.
func (a *App) Handle(k Kind, id string) *Handle {
	h := &Handle{a: a, k: k, id: id}
	h.resolve(a.liveLayer())
	return h
}

// ID is the rule id the handle holds.
func (h *Handle) ID() string { return h.id }

// Rule returns the rule of the handle's kind and id, or nil, as Lookup.
func (h *Handle) Rule() *Rule {
	cur := h.a.liveLayer()
	res := h.res.Load()
	if res.layer != cur {
		res = h.resolve(cur)
	}
	if res.slot != nil {
		return res.slot.rule.Load()
	}
	return res.rule
}

func (h *Handle) resolve(cur *layer) *resolution {
	res := &resolution{layer: cur}
	if h.k < numKinds {
		res.slot = cur[h.k][h.id]
		if res.slot == nil {
			res.rule = h.a.static[h.k][h.id]
		}
	}
	h.res.Store(res)
	return res
}

// liveLayer is the layer Lookup reads over the static rules: Redis's, or the
// in-memory one without Redis.
func (a *App) liveLayer() *layer {
	if a.source != nil {
		return a.source.snapshot()
	}
	return memory.snap.Load()
}
