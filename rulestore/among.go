package rulestore

// A rule can be valid alone and still not hold among the other rules of
// its kind: the guarantees of one parent's children in nested quotas must
// add up to at most 100 %. A parsed value that implements Grouped is
// checked among the rules a write leaves in force, so the writer is told,
// with the rules and fields named, before anything is stored.

// Grouped is implemented by rule values that must hold among the other
// rules of their kind.
type Grouped interface {
	// CheckAmong checks the value, as rule id, among rules: the parsed
	// values of its kind by id as the write leaves them (itself included).
	CheckAmong(id string, rules map[string]any) error
}

// checkAmong fails a write of value as rule id of kind k that does not
// hold among the rules this instance holds.
func (a *App) checkAmong(k Kind, id string, value any) error {
	g, ok := value.(Grouped)
	if !ok {
		return nil
	}
	rules := map[string]any{}
	for rid, r := range a.Rules(k) {
		rules[rid] = r.Value
	}
	rules[id] = value
	return g.CheckAmong(id, rules)
}

// checkAmongAfter fails an object of an apply whose rule does not hold
// among the rules of its kind as the whole apply leaves them.
func (a *App) checkAmongAfter(p *applyPlan, ref RuleRef, fail func(ErrorClass, string, ...any)) {
	g, ok := p.values[ref].(Grouped)
	if !ok {
		return
	}
	rules := map[string]any{}
	for id, r := range a.Rules(ref.Kind) {
		rules[id] = r.Value
	}
	for _, d := range p.prune {
		if d.Kind == ref.Kind && a.Static(d.Kind, d.ID) == nil {
			delete(rules, d.ID)
		}
	}
	for id, f := range p.req.Rules[ref.Kind.String()] {
		switch v := p.values[RuleRef{ref.Kind, id}]; {
		case f == nil:
			delete(rules, id)
		case v != nil:
			rules[id] = v
		}
	}
	if err := g.CheckAmong(ref.ID, rules); err != nil {
		fail(ErrInvalid, "%v", err)
	}
}
