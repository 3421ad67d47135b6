package rulestore

import (
	"context"
	"time"

	"github.com/sluicegw/sluice/rulestore/history"
)

// The store's side of the history (package rulestore/history): every
// change of a rule (admin API, CLI, or a raw redis-cli write seen by the
// store) is recorded with its full previous and new raw fields in the list
// gateway:history:<kind>:<id>, newest first. Every instance records the
// raw changes it sees; an entry whose version equals the newest one
// already recorded is dropped, so a change seen by the whole fleet (or
// written by the admin API, which records it in the same transaction) is
// recorded once. Without Redis the history is kept in memory.

// NewHistoryEntry records a change from prev to f (nil: a delete); op
// "rollback" marks a rollback, anything else is upsert or delete. st is
// the rule as the config declares it (nil: not declared): with nothing
// stored the rule's state is the declared one, and its versions are the
// declared version (see storedVersion), so an undo is recorded as a change
// to it and a rollback finds it.
func NewHistoryEntry(k Kind, id string, st *Rule, prev, f Fields, via, op string) history.Entry {
	e := history.Entry{Kind: k.String(), ID: id, Op: "upsert", Prev: prev, Fields: f, Via: via,
		Instance: instanceName, At: time.Now().UTC()}
	if f == nil {
		e.Op = "delete"
	}
	if op == "rollback" {
		e.Op = op
	}
	e.Version, e.PrevVersion = StoredVersion(st, f), StoredVersion(st, prev)
	e.Declared = st != nil
	return e
}

// record adds an entry to the in-memory history (no Redis). The caller
// holds m.mu.
func (m *memoryLayer) record(e history.Entry) {
	k, _ := ParseKind(e.Kind)
	ref := RuleRef{k, e.ID}
	if m.history == nil {
		m.history = map[RuleRef][]history.Entry{}
	}
	m.history[ref] = history.Prepend(m.history[ref], e)
}

// History is a rule's changes written through the admin API, newest first.
func (m *memoryLayer) History(_ context.Context, k Kind, id string) ([]history.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]history.Entry{}, m.history[RuleRef{k, id}]...), nil
}

// History returns the recorded changes of a rule, newest first.
func (a *App) History(ctx context.Context, k Kind, id string) ([]history.Entry, error) {
	if a.source == nil {
		return []history.Entry{}, nil
	}
	return a.source.History(ctx, k, id)
}
