package rulestore

import (
	"context"
	"encoding/hex"
	"fmt"
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
	snap    atomic.Pointer[Layer]
	changes atomic.Uint64               // moved after every store to snap or a slot (App.Changes)
	history map[RuleRef][]history.Entry // newest first, see history_store.go
}

// memoryPool holds the one memoryLayer every config generation shares.
var memoryPool = caddy.NewUsagePool()

const memoryKey = "memory"

func newMemoryLayer() (caddy.Destructor, error) {
	m := new(memoryLayer)
	m.snap.Store(NewLayer())
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
	if s := cur.Of(r.Kind)[r.ID]; s != nil {
		s.Rule.Store(r)
		return
	}
	next := cur.Clone(r.Kind)
	next.Of(r.Kind)[r.ID] = NewSlot(r)
	m.snap.Store(next)
}

// Write runs one admin write (see Source): the change is recorded in the
// history. The context is unused: memory does not wait.
func (m *memoryLayer) Write(_ context.Context, k Kind, id, via, op string, st *Rule, build func(cur Fields) (Fields, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.snap.Load()
	var prev Fields
	if r := cur.Get(k, id); r != nil {
		prev = r.Fields
	}
	raw, err := build(prev)
	if err != nil {
		return err
	}
	if (raw != nil && prev != nil && raw.Equal(prev)) || (raw == nil && prev == nil) {
		return nil // nothing changes: nothing to record
	}
	var r *Rule
	if raw != nil {
		v, _, err := ParseOver(k, id, st, raw) // build validated it
		if err != nil {
			return err
		}
		r = &Rule{Kind: k, ID: id, Fields: raw, Value: v, Source: "memory", Overlay: raw, Partial: st != nil}
	}
	var next Fields
	switch s := cur.Of(k)[id]; {
	case r != nil && s != nil:
		s.Rule.Store(r)
	case r != nil:
		n := cur.Clone(k)
		n.Of(k)[id] = NewSlot(r)
		m.snap.Store(n)
	case s != nil:
		n := cur.Clone(k)
		delete(n.Of(k), id)
		m.snap.Store(n)
	}
	m.changes.Add(1)
	if r != nil {
		next = r.Fields
	}
	m.record(NewHistoryEntry(k, id, st, prev, next, via, op))
	return nil
}

// remove drops a rule; it reports whether there was one.
func (m *memoryLayer) remove(k Kind, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.snap.Load()
	if cur.Get(k, id) == nil {
		return false
	}
	next := cur.Clone(k)
	delete(next.Of(k), id)
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

// Layer is the rules written through the admin API.
func (m *memoryLayer) Layer() *Layer { return m.snap.Load() }

// Changes moves after every write.
func (m *memoryLayer) Changes() uint64 { return m.changes.Load() }

// Name is "memory".
func (m *memoryLayer) Name() string { return "memory" }

// Exists reports whether the memory holds rule id.
func (m *memoryLayer) Exists(_ context.Context, k Kind, id string) (bool, error) {
	return m.snap.Load().Get(k, id) != nil, nil
}

// Patch is App.Patch in memory, checked again under the lock.
func (m *memoryLayer) Patch(_ context.Context, p PatchRequest) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := p.Static
	if r := m.snap.Load().Get(p.Kind, p.ID); r != nil {
		now = r
	}
	if now == nil {
		return false, fmt.Errorf("%s rule %q: %w", p.Kind, p.ID, ErrNoRule)
	}
	for name, want := range p.Expect {
		if now.Fields[name] != want {
			return false, nil
		}
	}
	m.putLocked(&Rule{Kind: p.Kind, ID: p.ID, Fields: p.Merged, Value: p.Value, Source: "memory"})
	EmitUpdated(p.Kind, p.ID, "upsert", "memory", p.Merged)
	return true, nil

}

// ApplySet is Source.ApplySet for the memory layer, under its lock.
func (m *memoryLayer) ApplySet(_ context.Context, refs map[RuleRef]bool, static func(Kind, string) *Rule, decide func(map[RuleRef]Fields) ([]ApplyObject, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.snap.Load()
	held := map[RuleRef]Fields{}
	for ref := range refs {
		if r := cur.Get(ref.Kind, ref.ID); r != nil {
			held[ref] = r.Fields
		}
	}
	objs, err := decide(held)
	if err != nil {
		return err
	}
	next := *cur
	cloned := make([]bool, NumKinds())
	for _, o := range objs {
		if o.Result == ApplyUnchanged {
			continue
		}
		if !cloned[o.kind] {
			next = *next.Clone(o.kind)
			cloned[o.kind] = true
		}
		if o.raw == nil {
			delete(next[o.kind], o.ID)
		} else {
			st := static(o.kind, o.ID)
			v, _, _ := ParseOver(o.kind, o.ID, st, o.raw) // parsed in decide
			next[o.kind][o.ID] = NewSlot(&Rule{Kind: o.kind, ID: o.ID, Fields: o.raw, Value: v, Source: "memory",
				Overlay: o.raw, Partial: st != nil})
		}
		m.record(NewHistoryEntry(o.kind, o.ID, static(o.kind, o.ID), o.prev, o.raw, "apply", ""))
	}
	m.snap.Store(&next)
	m.changes.Add(1)
	return nil
}
