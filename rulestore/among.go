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
