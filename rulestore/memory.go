package rulestore

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"
)

// memory holds the rules written through the admin API when no Redis is
// configured: an overlay over the static rules, like the Redis layer, but
// kept in this process only. It is package-level so a `caddy reload` keeps
// it; a restart loses it. Deleting an id brings its static rule (if any)
// back, as deleting a Redis rule does.
var memory struct {
	mu      sync.Mutex // serialises writers
	snap    atomic.Pointer[layer]
	history map[ruleRef][]HistoryEntry // newest first, see history.go
}

func init() { memory.snap.Store(new(layer)) }

// memoryPut validates nothing: the caller parsed the rule.
func memoryPut(r *Rule) {
	memory.mu.Lock()
	defer memory.mu.Unlock()
	cur := memory.snap.Load()
	if s := cur[r.Kind][r.ID]; s != nil {
		s.rule.Store(r)
		return
	}
	next := cur.clone(r.Kind)
	next[r.Kind][r.ID] = newSlot(r)
	memory.snap.Store(next)
}

// memoryApply runs one admin write on memory: build gets the raw fields
// held now (nil: none) and returns the new ones (nil: delete), or an error
// to write nothing. The change is recorded in the history.
func memoryApply(k Kind, id string, build func(cur Fields) (*Rule, error), via string) (prev Fields, err error) {
	memory.mu.Lock()
	defer memory.mu.Unlock()
	cur := memory.snap.Load()
	if r := cur.get(k, id); r != nil {
		prev = r.Fields
	}
	r, err := build(prev)
	if err != nil {
		return prev, err
	}
	var next Fields
	switch s := cur[k][id]; {
	case r != nil && s != nil:
		s.rule.Store(r)
	case r != nil:
		n := cur.clone(k)
		n[k][id] = newSlot(r)
		memory.snap.Store(n)
	case s != nil:
		n := cur.clone(k)
		delete(n[k], id)
		memory.snap.Store(n)
	}
	if r != nil {
		next = r.Fields
	}
	memoryRecord(newHistoryEntry(k, id, prev, next, via))
	return prev, nil
}

// memoryDelete drops an in-memory rule; it reports whether there was one.
func memoryDelete(k Kind, id string) bool {
	memory.mu.Lock()
	defer memory.mu.Unlock()
	cur := memory.snap.Load()
	if cur.get(k, id) == nil {
		return false
	}
	next := cur.clone(k)
	delete(next[k], id)
	memory.snap.Store(next)
	return true
}

// Version is a short digest of a rule's fields: equal fields, equal
// version on every instance. The admin API returns it and writes it to the
// change log, and /sluice/state lists it, so an operator can tell whether
// every instance holds the same rule.
func Version(f Fields) string {
	h := sha256.New()
	for _, name := range f.Names() {
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write([]byte(f[name]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}
