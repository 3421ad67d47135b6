package rulestore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

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

// HistoryKey is the history list of rule id of kind k.
func (n keyNames) HistoryKey(k Kind, id string) string {
	return n.prefix + history.KeyPrefix + k.String() + ":" + id
}

// newHistoryEntry records a change from prev to f (nil: a delete); op
// "rollback" marks a rollback, anything else is upsert or delete. st is
// the rule as the config declares it (nil: not declared): with nothing
// stored the rule's state is the declared one, and its versions are the
// declared version (see storedVersion), so an undo is recorded as a change
// to it and a rollback finds it.
func newHistoryEntry(k Kind, id string, st *Rule, prev, f Fields, via, op string) history.Entry {
	e := history.Entry{Kind: k.String(), ID: id, Op: "upsert", Prev: prev, Fields: f, Via: via,
		Instance: instanceName, At: time.Now().UTC()}
	if f == nil {
		e.Op = "delete"
	}
	if op == "rollback" {
		e.Op = op
	}
	e.Version, e.PrevVersion = storedVersion(st, f), storedVersion(st, prev)
	e.Declared = st != nil
	return e
}

// queueHistory queues an entry written by the admin API (dedupe false) or
// seen by an instance (dedupe true).
func (s *redisSource) queueHistory(ctx context.Context, p redis.Pipeliner, e history.Entry, dedupe bool) {
	k, _ := ParseKind(e.Kind)
	history.Push(ctx, p, s.names.HistoryKey(k, e.ID), e, dedupe)
}

// queueObserved queues the history entry of a change seen in Redis. On a
// Redis Cluster the rule hash and the list are in different slots, so one
// script cannot read both: there the entry is checked against the newest
// entry only (a late instance may record a change again).
func (s *redisSource) queueObserved(ctx context.Context, p redis.Pipeliner, e history.Entry) {
	if _, cluster := s.client.(*redis.ClusterClient); cluster {
		s.queueHistory(ctx, p, e, true)
		return
	}
	k, _ := ParseKind(e.Kind)
	history.PushObserved(ctx, p, s.names.HistoryKey(k, e.ID), s.names.RuleKey(k, e.ID), e)
}

// history reads a rule's history, newest first.
func (s *redisSource) history(ctx context.Context, k Kind, id string) ([]history.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	return history.Read(ctx, s.client, s.names.HistoryKey(k, id))
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
