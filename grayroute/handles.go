package grayroute

import (
	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// holdRules prepares the rule list: every rule by its handle, resolved
// once at setup (and, for a route, once per binding version), so a
// decision reads each rule without a map lookup, an inline rule beside its
// handle (the store's rule of its id replaces it while it exists).
func (h *Handler) holdRules() {
	var fixed []handlerkit.Entry[*Rule, struct{}]
	for i, ref := range h.Rules {
		fixed = append(fixed, handlerkit.Entry[*Rule, struct{}]{ID: ref.ID,
			Handle: h.store.UseHandle(rulestore.Gray, ref.ID), Inline: h.inline[i]})
	}
	h.rules = handlerkit.NewRuleList(h.store, rulestore.Gray, fixed, h.Route,
		func(b *rulestore.RouteBinding) []string { return b.Gray },
		func(string) struct{} { return struct{}{} }, heldOf)
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
func (h *Handler) current() *heldRules { return h.rules.Current() }

// heldOf is the resolved list as a decision reads it.
func heldOf(res *handlerkit.Resolved[*Rule, struct{}]) heldRules {
	next := heldRules{noBinding: res.MissingKind == rulestore.Binding && res.Missing != ""}
	if res.Missing != "" {
		next.missing = missingRule{res.MissingKind, res.Missing}
	}
	first := true
	for _, m := range res.Members {
		e := heldRule{rule: m.Rule, id: m.ID}
		if g := e.rule; g != nil && g.Tag != "" {
			e.tag = tagCheck{bit: g.tagBit, src: g.Source}
		}
		if e.rule != nil && first {
			next.readFirst, first = e.tag.bit != 0, false
		}
		if e.tag.bit != 0 {
			next.tagged++
		}
		next.list = append(next.list, e)
	}
	return next
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
