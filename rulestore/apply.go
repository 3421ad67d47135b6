package rulestore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// An apply makes the store hold a whole rule set, all or nothing: every
// rule and every reference is checked against the set plus what the store
// holds, then every change is written in one Redis transaction watched on
// every key the set names (or under the memory layer's lock), or none is.

// ApplyRequest is the body of POST /sluice/apply.
type ApplyRequest struct {
	// Rules is the rule set by kind, then id: for an id declared in the
	// config its overlay, for any other id a complete rule.
	Rules map[string]map[string]Fields `json:"rules"`
	// Prune also deletes the rules held in Redis (or memory) that Rules
	// does not list (a declared rule keeps its config's fields).
	Prune bool `json:"prune,omitempty"`
	// Expect holds, by kind then id, the version each rule must have for
	// the apply to go ahead ("": the rule must not exist), e.g. the
	// prev_version a dry run answered: a change made since then fails the
	// apply (ErrPreconditionFailed) instead of being overwritten.
	Expect map[string]map[string]string `json:"expect,omitempty"`
	// Impact, on a dry run: replay this much of each changed rate_limit
	// rule's recent traffic against its new fields (ApplyObject.Impact);
	// 0: none. A query parameter, not the body's.
	Impact time.Duration `json:"-"`
}

// ApplyObject is one rule of an apply and what the apply does to it.
type ApplyObject struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Result is created, changed, unchanged, deleted (pruned) or failed.
	Result string `json:"result"`
	// Reason says why the rule failed.
	Reason string `json:"reason,omitempty"`
	// PrevVersion is the rule's version before the apply ("" if none);
	// Version after it ("" if no rule remains).
	PrevVersion string `json:"prev_version,omitempty"`
	Version     string `json:"version,omitempty"`
	// Diff lists the effective fields that change.
	Diff []FieldChange `json:"diff,omitempty"`
	// NotDeclaredOn names the live instances whose config does not
	// declare the rule while others' does (see WriteResult).
	NotDeclaredOn []string `json:"not_declared_on,omitempty"`
	// Impact is what the rule's new fields would have done to its recent
	// traffic (a dry run with an impact window).
	Impact *replay.Impact `json:"impact,omitempty"`

	kind      Kind
	prev, raw Fields     // raw fields held before, and to hold after (nil: none)
	class     ErrorClass // what a failure means: ErrInvalid or ErrPreconditionFailed
}

// Ref names the object's rule.
func (o ApplyObject) Ref() RuleRef { return RuleRef{o.kind, o.ID} }

// Prev are the raw fields held before the apply (nil: none); Next those to
// hold after it (nil: none, a delete).
func (o ApplyObject) Prev() Fields { return o.prev }

// Next: see Prev.
func (o ApplyObject) Next() Fields { return o.raw }

// ApplyResult is the answer to POST /sluice/apply.
type ApplyResult struct {
	DryRun bool `json:"dry_run,omitempty"`
	// Applied tells whether the changes were written (never for a dry run,
	// or when any object failed).
	Applied bool `json:"applied"`
	// Stored is where the changes go: redis, or memory without Redis.
	Stored string `json:"stored"`
	// Objects lists every rule of the set (and every rule pruned), by kind
	// then id.
	Objects []ApplyObject `json:"objects"`
	// Counts by result.
	Counts map[string]int `json:"counts"`
	// Error says why nothing was written.
	Error string `json:"error,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Failure is nil when the set is (or would be) written; else an *Error
// with Error's text, of class ErrPreconditionFailed when a rule changed
// from its expected version, else ErrInvalid.
func (r ApplyResult) Failure() error {
	if r.Error == "" {
		return nil
	}
	class := ErrInvalid
	for _, o := range r.Objects {
		if o.class == ErrPreconditionFailed {
			class = o.class
		}
	}
	return &Error{Class: class, Err: errors.New(r.Error)}
}

// Apply results.
const (
	ApplyCreated   = "created"
	ApplyChanged   = "changed"
	ApplyUnchanged = "unchanged"
	ApplyDeleted   = "deleted"
	ApplyFailed    = "failed"
)

// applyPlan is an apply's set, parsed, before the store is read.
type applyPlan struct {
	req    ApplyRequest
	refs   map[RuleRef]bool // every rule the set names, writes or references
	values map[RuleRef]any  // the set's parsed values (nil: failed to parse)
	errs   map[RuleRef]error
	prune  []RuleRef // rules held now that the set does not list
}

// planApply parses every rule of the set. It fails only for a set that
// cannot be read at all (an unknown kind, a bad id).
func (a *App) planApply(req ApplyRequest) (*applyPlan, error) {
	p := &applyPlan{req: req, refs: map[RuleRef]bool{}, values: map[RuleRef]any{}, errs: map[RuleRef]error{}}
	for name, rules := range req.Rules {
		k, ok := ParseKind(name)
		if !ok {
			return nil, fmt.Errorf("unknown rule kind %q (want %s)", name, strings.Join(kindNames(), ", "))
		}
		for id, f := range rules {
			if err := ValidID(id); err != nil {
				return nil, fmt.Errorf("%s %q: %v", k, id, err)
			}
			ref := RuleRef{k, id}
			p.refs[ref] = true
			v, _, err := ParseOver(k, id, a.Static(k, id), f)
			if err != nil {
				p.errs[ref] = err
				continue
			}
			p.values[ref] = v
			if rr, ok := v.(Referrer); ok {
				for _, r := range rr.Refs() {
					p.refs[RuleRef{r.Kind, r.ID}] = true
				}
			}
		}
	}
	for name := range req.Expect {
		if _, ok := ParseKind(name); !ok {
			return nil, fmt.Errorf("expect: unknown rule kind %q", name)
		}
	}
	if req.Prune {
		for _, k := range Kinds() {
			for id, r := range a.Rules(k) {
				if r.Overlay != nil && req.Rules[k.String()][id] == nil {
					p.prune = append(p.prune, RuleRef{k, id})
					p.refs[RuleRef{k, id}] = true
				}
			}
		}
	}
	return p, nil
}

// decide gives every object its verdict from the raw fields held now (held
// lists every ref of the plan; nil: none). It reports whether all passed.
func (a *App) decide(p *applyPlan, held map[RuleRef]Fields) ([]ApplyObject, bool) {
	var out []ApplyObject
	for _, k := range Kinds() {
		for _, id := range sortedIDs(p.req.Rules[k.String()]) {
			out = append(out, a.decideOne(p, held, RuleRef{k, id}, p.req.Rules[k.String()][id], true))
		}
	}
	for _, ref := range p.prune {
		out = append(out, a.decideOne(p, held, ref, nil, false))
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].ID < out[j].ID
	})
	ok := true
	for _, o := range out {
		ok = ok && o.Result != ApplyFailed
	}
	return out, ok
}

// final reports whether ref exists after the apply.
func (a *App) final(p *applyPlan, held map[RuleRef]Fields, ref RuleRef) bool {
	if f, listed := p.req.Rules[ref.Kind.String()][ref.ID]; listed {
		return f != nil
	}
	for _, d := range p.prune {
		if d == ref {
			return a.Static(ref.Kind, ref.ID) != nil
		}
	}
	return held[ref] != nil || a.Static(ref.Kind, ref.ID) != nil
}

// decideOne is one object's verdict: raw are the fields the set gives it
// (listed: false for a rule the prune deletes).
func (a *App) decideOne(p *applyPlan, held map[RuleRef]Fields, ref RuleRef, raw Fields, listed bool) ApplyObject {
	st := a.Static(ref.Kind, ref.ID)
	cur := held[ref]
	o := ApplyObject{Kind: ref.Kind.String(), ID: ref.ID, kind: ref.Kind, prev: cur, raw: raw}
	before, after := effectiveFields(st, cur), effectiveFields(st, raw)
	if before != nil {
		o.PrevVersion = Version(before)
	}
	if after != nil {
		o.Version = Version(after)
	}
	o.Diff = DiffFields(before, after)
	switch {
	case !listed:
		o.Result = ApplyDeleted
	case cur != nil && maps.Equal(cur, raw):
		o.Result = ApplyUnchanged
	case before == nil:
		o.Result = ApplyCreated
	default:
		o.Result = ApplyChanged
	}
	fail := func(class ErrorClass, format string, args ...any) {
		if o.Result != ApplyFailed {
			o.Result, o.Reason, o.class = ApplyFailed, fmt.Sprintf(format, args...), class
		}
	}
	if want, ok := p.req.Expect[o.Kind][o.ID]; ok && want != o.PrevVersion {
		now := o.PrevVersion
		if now == "" {
			now = "none"
		}
		fail(ErrPreconditionFailed, "changed since it was read: version now %s, expected %q", now, want)
	}
	if err := p.errs[ref]; err != nil {
		if st == nil && cur == nil && IncompleteHere(raw, err) {
			err = fmt.Errorf("%w (a rule that is not declared in the config must be complete)", err)
		}
		fail(ErrInvalid, "%v", err)
	}
	a.checkRefs(p, held, ref, fail)
	a.checkAmongAfter(p, ref, fail)
	if !listed && st == nil {
		if by := a.referrers(p, held, ref); len(by) > 0 {
			fail(ErrInvalid, "still named by %s", strings.Join(by, ", "))
		}
	}
	return o
}

// effectiveFields are raw overlaid on the config's rule st: what is in
// force (nil: nothing).
func effectiveFields(st *Rule, raw Fields) Fields {
	switch {
	case raw != nil && st != nil:
		return MergeFields(st.Fields, raw)
	case raw != nil:
		return raw
	case st != nil:
		return st.Fields
	}
	return nil
}

// checkRefs fails an object whose rule names a rule that does not exist
// after the apply.
func (a *App) checkRefs(p *applyPlan, held map[RuleRef]Fields, ref RuleRef, fail func(ErrorClass, string, ...any)) {
	rr, ok := p.values[ref].(Referrer)
	if !ok {
		return
	}
	for _, r := range rr.Refs() {
		switch to := (RuleRef{r.Kind, r.ID}); {
		case a.final(p, held, to):
		case held[to] != nil: // held now, deleted by the prune
			fail(ErrInvalid, "field %s: %s rule %q is held in %s, but --prune deletes it (the set does not list it): "+
				"list it in the set, or name another rule", r.Field, r.Kind, r.ID, a.WritesTo())
		default:
			fail(ErrInvalid, "field %s: no %s rule %q, neither in the set nor in %s%s",
				r.Field, r.Kind, r.ID, a.WritesTo(), DidYouMean(r.ID, a.knownAfter(p, held, r.Kind)...))
		}
	}
}

// knownAfter lists the ids of kind k that exist after the apply, for a
// suggestion.
func (a *App) knownAfter(p *applyPlan, held map[RuleRef]Fields, k Kind) []string {
	ids := map[string]bool{}
	for id := range a.Rules(k) {
		ids[id] = true
	}
	for id := range p.req.Rules[k.String()] {
		ids[id] = true
	}
	for ref, f := range held {
		if ref.Kind == k && f != nil {
			ids[ref.ID] = true
		}
	}
	return sortedIDs(ids)
}

// referrers lists the route bindings left after the apply that name ref:
// those of the set, and those held now that the set does not replace.
func (a *App) referrers(p *applyPlan, held map[RuleRef]Fields, ref RuleRef) []string {
	var by []string
	names := func(v any) bool {
		rr, ok := v.(Referrer)
		if !ok {
			return false
		}
		for _, r := range rr.Refs() {
			if r.Kind == ref.Kind && r.ID == ref.ID {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	for id := range p.req.Rules[Binding.String()] {
		seen[id] = true
		if names(p.values[RuleRef{Binding, id}]) {
			by = append(by, "binding "+id)
		}
	}
	for id, r := range a.Rules(Binding) {
		if seen[id] || !a.final(p, held, RuleRef{Binding, id}) {
			continue
		}
		v := r.Value
		if slices.Contains(p.prune, RuleRef{Binding, id}) {
			v = a.Static(Binding, id).Value // its overlay pruned: the config's binding stays
		}
		if names(v) {
			by = append(by, "binding "+id)
		}
	}
	sort.Strings(by)
	return by
}

// errApplyFailed stops an apply's transaction after a failed verdict.
var errApplyFailed = errors.New("apply failed")

// Apply checks a rule set and, unless dryRun or any rule fails, writes
// every change (history, change log and publish for each) at once.
func (a *App) Apply(ctx context.Context, req ApplyRequest, dryRun bool) (ApplyResult, error) {
	res := ApplyResult{DryRun: dryRun, Stored: a.WritesTo()}
	if req.Impact != 0 {
		if err := checkImpactRequest(RateLimit, dryRun, req.Impact); err != nil {
			return res, err
		}
	}
	p, err := a.planApply(req)
	if err != nil {
		return res, &Error{Class: ErrInvalid, Err: err}
	}
	var ok bool
	decide := func(held map[RuleRef]Fields) ([]ApplyObject, error) {
		res.Objects, ok = a.decide(p, held)
		switch {
		case !ok:
			return nil, errApplyFailed
		case dryRun:
			return nil, errDryRun
		}
		return res.Objects, nil
	}
	if a.redis == nil {
		res.Note = memoryNote
	}
	err = a.source.ApplySet(ctx, p.refs, a.Static, decide)
	res.Counts = map[string]int{}
	for _, o := range res.Objects {
		res.Counts[o.Result]++
	}
	if err == nil || errors.Is(err, errDryRun) {
		a.markLacking(ctx, res.Objects)
	}
	switch {
	case errors.Is(err, errApplyFailed):
		res.Error = "nothing written: " + failures(res.Objects)
		return res, nil
	case errors.Is(err, errDryRun):
		return res, a.applyImpacts(ctx, res.Objects, req.Impact)
	case err != nil && ClassOf(err) == "":
		return res, Errorf(ErrBackend, "applying in redis: %w", err)
	case err != nil:
		return res, err
	}
	res.Applied = true
	for _, o := range res.Objects {
		if o.Result == ApplyUnchanged {
			continue
		}
		op := "upsert"
		if o.raw == nil {
			op = "delete"
		}
		adminWrites.WithLabelValues(o.Kind, op, "ok").Inc()
		if a.redis == nil {
			EmitUpdated(o.kind, o.ID, op, "memory", o.raw)
		}
	}
	a.logger.Info("rule set applied through the admin API", zap.Int("created", res.Counts[ApplyCreated]),
		zap.Int("changed", res.Counts[ApplyChanged]), zap.Int("deleted", res.Counts[ApplyDeleted]),
		zap.Int("unchanged", res.Counts[ApplyUnchanged]), zap.String("stored", res.Stored))
	return res, nil
}

// failures is the failed objects' reasons, one line each.
func failures(objs []ApplyObject) string {
	var lines []string
	for _, o := range objs {
		if o.Result == ApplyFailed {
			lines = append(lines, fmt.Sprintf("%s %s: %s", o.Kind, o.ID, o.Reason))
		}
	}
	return strings.Join(lines, "; ")
}
