package grayroute

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/rulestore"
)

// ruleHandles are a handler's rules held as store handles, resolved once at
// setup (and, for a route, once per binding version), so a decision reads
// each rule without a map lookup; rulestore.Handle re-resolves on a new
// layer.
type ruleHandles struct {
	list  []*rulestore.Handle // parallel to Rules
	route *rulestore.Handle   // the route binding, with Route
	// bound: the handles of the binding's gray list, for the binding
	// version they were made for.
	bound atomic.Pointer[boundRules]
}

type boundRules struct {
	binding *rulestore.RouteBinding
	list    []*rulestore.Handle
}

func (h *Handler) holdRules() {
	h.handles.list = make([]*rulestore.Handle, len(h.Rules))
	for i, ref := range h.Rules {
		h.handles.list[i] = h.store.Handle(rulestore.Gray, ref.ID)
	}
	if h.Route != "" {
		h.handles.route = h.store.Handle(rulestore.Binding, h.Route)
	}
}

// routeRules returns the handles of the route's gray list, or false when
// the binding is missing.
func (h *Handler) routeRules() ([]*rulestore.Handle, bool) {
	r := h.handles.route.Rule()
	if r == nil {
		return nil, false
	}
	b := r.Value.(*rulestore.RouteBinding)
	if cur := h.handles.bound.Load(); cur != nil && cur.binding == b {
		return cur.list, true
	}
	next := &boundRules{binding: b, list: make([]*rulestore.Handle, len(b.Gray))}
	for i, id := range b.Gray {
		next.list[i] = h.store.Handle(rulestore.Gray, id)
	}
	h.handles.bound.Store(next)
	return next.list, true
}

// held returns the current rule of a handle: the store's, else the inline
// one (nil for none, which is warned about).
func (h *Handler) held(hd *rulestore.Handle, inline *Rule) *Rule {
	if r := hd.Rule(); r != nil {
		return r.Value.(*Rule)
	}
	if inline == nil {
		h.store.WarnMissing(rulestore.Gray, hd.ID())
	}
	return inline
}
