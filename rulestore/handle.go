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
	layer  *Layer
	slot   *Slot // the id's slot in layer; nil if the layer lacks the id
	static *Rule // the static rule, or nil
}

// Handle returns a handle on the rule of kind k with this id, present or not.
func (a *App) Handle(k Kind, id string) *Handle {
	h := &Handle{a: a, k: k, id: id}
	h.resolve(a.overlayLayer())
	return h
}

// UseHandle is Handle for an id the config names (a handler's rule or
// route binding, fixed at provision), which it also marks as used here
// (see Uses). Ids reached only through a binding's list are
// not marked: they come and go with Redis, and a set of them would grow
// without bound.
func (a *App) UseHandle(k Kind, id string) *Handle {
	a.used.Store(RuleRef{k, id}, true)
	return a.Handle(k, id)
}

// ID is the rule id the handle holds.
func (h *Handle) ID() string { return h.id }

// Rule returns the rule of the handle's kind and id, or nil, as Lookup: a
// Redis (or in-memory) rule overlays the static one field by field
// (overlay.go).
func (h *Handle) Rule() *Rule {
	cur := h.a.overlayLayer()
	res := h.res.Load()
	if res.layer != cur {
		res = h.resolve(cur)
	}
	if res.slot != nil {
		if r := res.slot.Rule.Load(); r != nil {
			if e := h.a.effective(h.k, h.id, r); e != nil {
				return e
			}
		}
	}
	return res.static
}

// Changes is a count that moves whenever what a Handle of this store
// answers may change: a new layer, or a rule updated in its slot. A hot
// path that keeps what its handles returned reads Changes first, then the
// handles, and keeps the result while Changes reads the same: one atomic
// load per request instead of one handle per rule. (A write stores the
// rule first, then moves the count.)
func (a *App) Changes() uint64 {
	if a.source == nil { // an App built without Provision: nothing changes
		return 0
	}
	return a.source.Changes()
}

func (h *Handle) resolve(cur *Layer) *resolution {
	res := &resolution{layer: cur}
	res.slot = ByKind(*cur, h.k)[h.id]
	res.static = ByKind(h.a.static, h.k)[h.id]
	h.res.Store(res)
	return res
}

// Uses reports whether a handler of this config holds a Handle on rule id
// (UseHandle): an incomplete overlay of it is rejected here even if
// another instance declares it, since this one would serve it.
func (a *App) Uses(k Kind, id string) bool {
	_, ok := a.used.Load(RuleRef{k, id})
	return ok
}
