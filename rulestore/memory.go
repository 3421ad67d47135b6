package rulestore

import (
	"encoding/hex"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/sluicegw/sluice/rulestore/history"
)

// memoryLayer holds the rules written through the admin API when no Redis
// is configured: an overlay over the static rules, like the Redis layer,
// but kept in this process only. It lives in a UsagePool, so a `caddy
// reload` keeps it while a restart (or stopping the last config) loses it.
// Deleting an id brings its static rule (if any) back, as deleting a Redis
// rule does.
type memoryLayer struct {
	mu      sync.Mutex // serialises writers
	snap    atomic.Pointer[layer]
	changes atomic.Uint64               // moved after every store to snap or a slot (App.Changes)
	history map[ruleRef][]history.Entry // newest first, see history_store.go
}

// memoryPool holds the one memoryLayer every config generation shares.
var memoryPool = caddy.NewUsagePool()

const memoryKey = "memory"

func newMemoryLayer() (caddy.Destructor, error) {
	m := new(memoryLayer)
	m.snap.Store(newLayer())
	return m, nil
}

// Destruct has nothing to release: the rules go with the last config.
func (m *memoryLayer) Destruct() error { return nil }

// put stores a parsed rule.
func (m *memoryLayer) put(r *Rule) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(r)
}

// putLocked is put for a caller holding m.mu.
func (m *memoryLayer) putLocked(r *Rule) {
	cur := m.snap.Load()
	defer m.changes.Add(1)
	if s := cur.of(r.Kind)[r.ID]; s != nil {
		s.rule.Store(r)
		return
	}
	next := cur.clone(r.Kind)
	next.of(r.Kind)[r.ID] = newSlot(r)
	m.snap.Store(next)
}

// apply runs one admin write: build gets the raw fields held now (nil:
// none) and returns the new ones (nil: delete), or an error to write
// nothing. The change is recorded in the history.
func (m *memoryLayer) apply(k Kind, id string, build func(cur Fields) (*Rule, error), st *Rule, via, op string) (prev Fields, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.snap.Load()
	if r := cur.get(k, id); r != nil {
		prev = r.Fields
	}
	r, err := build(prev)
	if err != nil {
		return prev, err
	}
	if (r != nil && prev != nil && r.Fields.Equal(prev)) || (r == nil && prev == nil) {
		return prev, nil // nothing changes: nothing to record
	}
	var next Fields
	switch s := cur.of(k)[id]; {
	case r != nil && s != nil:
		s.rule.Store(r)
	case r != nil:
		n := cur.clone(k)
		n.of(k)[id] = newSlot(r)
		m.snap.Store(n)
	case s != nil:
		n := cur.clone(k)
		delete(n.of(k), id)
		m.snap.Store(n)
	}
	m.changes.Add(1)
	if r != nil {
		next = r.Fields
	}
	m.record(newHistoryEntry(k, id, st, prev, next, via, op))
	return prev, nil
}

// remove drops a rule; it reports whether there was one.
func (m *memoryLayer) remove(k Kind, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.snap.Load()
	if cur.get(k, id) == nil {
		return false
	}
	next := cur.clone(k)
	delete(next.of(k), id)
	m.snap.Store(next)
	m.changes.Add(1)
	return true
}

// Version is a short digest of a rule's fields: equal fields, equal
// version on every instance. The admin API returns it and writes it to the
// change log, and /sluice/state lists it, so an operator can tell whether
// every instance holds the same rule.
func Version(f Fields) string {
	sum := f.Digest()
	return hex.EncodeToString(sum[:6])
}
