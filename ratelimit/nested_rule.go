package ratelimit

import (
	"strconv"
	"strings"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/ratelimit/nested"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// OverLimit is what a rule's refusal does (over_limit).
type OverLimit uint8

const (
	// OverRefuse answers the request with the refusal (the default).
	OverRefuse OverLimit = iota
	// OverTag lets the request through, marked for the upstream.
	OverTag
	// OverDemote lets it through at the lowest overload class, sheddable.
	OverDemote
)

func (o OverLimit) String() string {
	switch o {
	case OverTag:
		return "tag"
	case OverDemote:
		return "demote"
	}
	return "refuse"
}

// Nesting is a rule's place in a tree of nested quotas (parent,
// parent_key, guarantee) and what its refusals do (over_limit).
type Nesting struct {
	// Parent is the id of the rule whose budget the rule's keys also
	// spend; "" for a flat rule or a tree's root.
	Parent string
	// ParentKey gives the parent's key per request; without it
	// (HasParentKey false) the key is read from the Redis hash
	// gateway:parent:<rule id>.
	ParentKey    handlerkit.Key
	HasParentKey bool
	// Guarantee is the keys' share of the parent's rate or quota, 0 to 1.
	Guarantee float64
	OverLimit OverLimit
	// limit is the rule's ceiling as a level of a tree.
	limit nested.Limit
}

// onParent: the fields that apply under a parent.
var onParent = condition{func(p *ruleParse) bool { return p.r.Nest.Parent != "" }, "a rule with a parent", []string{"parent", "org"}}

func parseParent(p *ruleParse, v string) error {
	v = strings.TrimSpace(v)
	if err := rulestore.ValidID(v); err != nil {
		return p.Errorf("want a rate_limit rule id: %v", err)
	}
	if v == p.r.ID {
		return p.Errorf("a rule cannot be its own parent")
	}
	p.r.Nest.Parent = v
	return nil
}

func parseParentKey(p *ruleParse, v string) (err error) {
	if p.r.Nest.ParentKey, err = handlerkit.ParseKey(v); err != nil {
		return p.Errorf("%v", err)
	}
	p.r.Nest.HasParentKey = true
	return nil
}

// parseGuarantee reads a percent, with or without its sign.
func parseGuarantee(p *ruleParse, v string) error {
	x, ok := syntax.ParseNumber(strings.TrimSuffix(strings.TrimSpace(v), "%"), 0, 100)
	if !ok {
		return p.Errorf("want a percent from 0 to 100 (e.g. 50%%): the keys' share of the parent's rate or quota")
	}
	p.r.Nest.Guarantee = x / 100
	return nil
}

func parseOverLimit(p *ruleParse, v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "refuse":
		p.r.Nest.OverLimit = OverRefuse
	case "tag":
		p.r.Nest.OverLimit = OverTag
	case "demote":
		p.r.Nest.OverLimit = OverDemote
	default:
		return p.Errorf("want refuse, tag or demote")
	}
	return nil
}

// parseNest reads the nesting fields, once the rest of the rule is known:
// a rule with a parent spends along its tree instead of in its engine, so
// it takes only what the tree decides.
func (r *Rule) parseNest(p *ruleParse) error {
	if err := p.read("parent", "parent_key", "guarantee", "over_limit"); err != nil {
		return err
	}
	r.Nest.limit = r.nestedLimit()
	if r.Nest.Parent == "" {
		return nil
	}
	if why := r.nestableWhy(); why != "" {
		return p.Fields.Errorf("parent", "%s", why)
	}
	for _, f := range []string{"overrides", "max_concurrent", "max_concurrent_total", "lease_size"} {
		if _, ok := p.Get(f); ok {
			return p.Fields.Errorf(f, "does not apply to a rule with a parent (a nested quota)")
		}
	}
	return nil
}

// nestableWhy says why r cannot be a level of a tree ("" when it can): a
// level is a token bucket or calendar quota, decided whole by
// nested.Spend (scope local) or its script (scope cluster).
func (r *Rule) nestableWhy() string {
	switch {
	case r.Type == SlidingWindow:
		return "a nested quota is a token_bucket or a calendar quota, not a sliding_window"
	case r.InFlightOnly:
		return "a nested quota needs a rate (qps) or a quota"
	case r.Settles:
		return "a nested quota charges when the request is let in: not with count_status or response_cost"
	case r.Flow.Behavior != Reject || r.Flow.Adaptive != nil:
		return "a nested quota is decided with control_behavior reject and without max_concurrent adaptive"
	}
	return ""
}

// nestedLimit is the rule's ceiling as nested reads it.
func (r *Rule) nestedLimit() nested.Limit {
	if r.Calendar != nil {
		return nested.Limit{Quota: r.Limits.Max, Calendar: r.Calendar}
	}
	return nested.Limit{QPS: r.Limits.QPS, Burst: r.Limits.Burst}
}

// Refs names the rule's parent, so the store refuses a rule whose parent
// does not exist.
func (r *Rule) Refs() []rulestore.Ref {
	if r.Nest.Parent == "" {
		return nil
	}
	return []rulestore.Ref{{Field: "parent", Kind: rulestore.RateLimit, ID: r.Nest.Parent}}
}

var _ rulestore.Referrer = (*Rule)(nil)

// CheckAmong checks r, a write of rule id, among the rules of its kind:
// the guarantees of its parent's children, r's new one included, add up
// to at most 100 % (the error names each rule and field).
func (r *Rule) CheckAmong(id string, rules map[string]any) error {
	if r.Nest.Parent == "" {
		return nil
	}
	typed := make(map[string]*Rule, len(rules))
	for rid, v := range rules {
		if rr, ok := v.(*Rule); ok {
			typed[rid] = rr
		}
	}
	return checkShares(r.Nest.Parent, typed)
}

var _ rulestore.Grouped = (*Rule)(nil)

// guaranteePct is the guarantee as the operator wrote it, in percent.
func (r *Rule) guaranteePct() string {
	return strconv.FormatFloat(r.Nest.Guarantee*100, 'f', -1, 64)
}
