package rulestore

import (
	"context"
	"sort"
	"time"

	"github.com/sluicegw/sluice/rulestore/history"
)

// The status page's fleet-wide feed of recent rule changes: the newest
// entries of the change log (every write through Sluice, from any
// instance), each joined with its rule's history entry for who made it and
// what it changed. Without Redis, the in-memory history of this instance.

// ChangesShown bounds the feed.
const ChangesShown = 50

// RecentChange is one rule change in the feed.
type RecentChange struct {
	// Kind is the rule's kind: rate_limit, circuit_breaker, gray, binding or
	// one another module registers.
	Kind string `json:"kind"`
	// ID is the rule's id (a route name for a binding).
	ID string `json:"id"`
	// Op is upsert, delete or rollback.
	Op string `json:"op"`
	// Version is the rule's version after the change ("" once deleted).
	Version string `json:"version,omitempty"`
	// At is when the change was made.
	At time.Time `json:"at"`
	// Via says how the change was made (see history.Entry), when the rule's
	// history still holds the entry.
	Via string `json:"via,omitempty"`
	// Instance is the instance that made it (see history.Entry), likewise.
	Instance string `json:"instance,omitempty"`
	// Diff lists the fields the change set, changed or unset.
	Diff []FieldChange `json:"diff"`
}

func changeFromHistory(e history.Entry) RecentChange {
	return RecentChange{Kind: e.Kind, ID: e.ID, Op: e.Op, Version: e.Version, At: e.At, Via: e.Via,
		Instance: e.Instance, Diff: DiffFields(e.Prev, e.Fields)}
}

// RecentChanges returns the newest rule changes, newest first.
func (a *App) RecentChanges(ctx context.Context) ([]RecentChange, error) {
	if a.source == nil {
		return []RecentChange{}, nil
	}
	return a.source.RecentChanges(ctx)
}

// RecentChanges are the newest changes written through the admin API.
func (m *memoryLayer) RecentChanges(context.Context) ([]RecentChange, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []RecentChange{}
	for _, h := range m.history {
		for _, e := range h {
			out = append(out, changeFromHistory(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out[:min(len(out), ChangesShown)], nil
}
