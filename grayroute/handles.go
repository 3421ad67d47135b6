package grayroute

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/internal/handlerkit"
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
	held  handlerkit.ByChanges[heldRules] // what they answer now (current)
}

type boundRules struct {
	binding *rulestore.RouteBinding
	list    []*rulestore.Handle
}

func (h *Handler) holdRules() {
	h.handles.list = make([]*rulestore.Handle, len(h.Rules))
	for i, ref := range h.Rules {
		h.handles.list[i] = h.store.UseHandle(rulestore.Gray, ref.ID)
	}
	if h.Route != "" {
		h.handles.route = h.store.UseHandle(rulestore.Binding, h.Route)
	}
	h.handles.held.Init(h.store, h.resolveRules)
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

// heldRules are the rules a decision tries, as the handles answer while
// the store does not change: a decision reads one atomic counter instead
// of one handle per rule.
type heldRules struct {
	list []heldRule // in evaluation order
	// readFirst: the first rule present has a tag, so every request reads
	// its headers (a rule without a tag matches every request: the rules
	// after it are never tried): listed, or with at most maskAfter tagged
	// rules (tagged), looked up.
	readFirst bool
	tagged    int
	// noBinding: the route binding is missing (warned per request).
	noBinding bool
	// missing: the first rule (or binding) missing, for on_missing_rule
	// refuse; zero when none is.
	missing missingRule
}

type missingRule struct {
	kind rulestore.Kind
	id   string
}

// heldRule is one rule of the list, with its tag check beside it, so the
// usual rule, whose tag header the request lacks, is turned away without
// touching the rule itself.
type heldRule struct {
	tag  tagCheck
	rule *Rule // nil: missing (warned per request)
	id   string
}

// current returns the rules as the store holds them now.
func (h *Handler) current() *heldRules { return h.handles.held.Get() }

// resolveRules reads the handles: the rules until the store changes.
func (h *Handler) resolveRules() heldRules {
	var next heldRules
	if h.Route != "" {
		list, ok := h.routeRules()
		next.noBinding = !ok
		for _, hd := range list {
			next.add(hd, nil)
		}
	} else {
		for i, hd := range h.handles.list {
			next.add(hd, h.inline[i])
		}
	}
	if next.noBinding {
		next.missing = missingRule{rulestore.Binding, h.Route}
	}
	first := true
	for _, e := range next.list {
		if e.rule == nil && next.missing.id == "" {
			next.missing = missingRule{rulestore.Gray, e.id}
		}
		if e.rule != nil && first {
			next.readFirst, first = e.tag.bit != 0, false
		}
		if e.tag.bit != 0 {
			next.tagged++
		}
	}
	return next
}

// add appends a handle's current rule: the store's, else the inline one.
func (l *heldRules) add(hd *rulestore.Handle, inline *Rule) {
	e := heldRule{rule: inline, id: hd.ID()}
	if r := hd.Rule(); r != nil {
		e.rule = r.Value.(*Rule)
	}
	if g := e.rule; g != nil && g.Tag != "" {
		e.tag = tagCheck{bit: g.tagBit, src: g.Source}
	}
	l.list = append(l.list, e)
}

// tagCheck is a rule's tag as the presence mask reads it; bit 0: no tag.
type tagCheck struct {
	bit uint64
	src Source
}

// lacks reports whether the request certainly lacks the tag: no header of
// its bit, and nowhere else the rule looks. The request's headers must have
// been read (kept out of here so this inlines).
func (c tagCheck) lacks(q *request) bool {
	return q.masked && q.mask&c.bit == 0 && (c.src == SourceHeader || c.src == SourceAny && q.headersOnly)
}

// match returns the first rule, in order, that the request matches, or nil.
func (h *Handler) match(q *request) *Rule {
	held := h.current()
	if held.noBinding {
		h.store.WarnMissing(rulestore.Binding, h.Route)
	}
	switch {
	case !held.readFirst:
	case held.tagged > maskAfter:
		q.readHeaders()
	default:
		q.lookupHeaders()
	}
	for i := range held.list {
		e := &held.list[i]
		if e.tag.bit != 0 && e.tag.lacks(q) { // headers read: e is at or after the first rule present
			continue
		}
		if e.rule == nil {
			h.store.WarnMissing(rulestore.Gray, e.id)
			continue
		}
		if e.rule.matches(q) {
			return e.rule
		}
	}
	return nil
}
