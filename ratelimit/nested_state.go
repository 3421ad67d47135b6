package ratelimit

import (
	"sync"
	"sync/atomic"

	"github.com/sluicegw/sluice/ratelimit/nested"
)

// nodeStripes is how many locks a tree's root stripes its paths over, by
// the root key: spends through different root keys run in parallel.
const nodeStripes = 64

// nodeTable holds one rule's nodes of nested quotas: each key's
// nested.State, kept in the rule's limiter so it lives across reloads as
// the engine's counters do. The zero value is ready. A node is touched
// only by spends through its tree's root rule, under one of the root's
// stripes (path); mu guards the map alone.
type nodeTable struct {
	mu      sync.Mutex
	m       map[string]*nodeEntry
	sweepAt int // the size at which the next insert sweeps
	parents parentCache
	checked atomic.Pointer[treeCheck] // the leaf's tree, as last checked
	stripes [nodeStripes]sync.Mutex
}

// nodeEntry is one node: its state, and the engine time after which it
// equals a fresh one, if nothing spends meanwhile.
type nodeEntry struct {
	s       nested.State
	expires int64
}

// node returns key's node, made on first use, kept at least idle ns
// from now.
func (t *nodeTable) node(key []byte, now, idle int64) *nested.State {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[string(key)]
	if e == nil {
		if t.m == nil {
			t.m = map[string]*nodeEntry{}
		}
		if len(t.m) >= t.sweepAt {
			t.sweep(now)
		}
		e = new(nodeEntry)
		t.m[string(key)] = e
	}
	e.expires = max(e.expires, now+idle)
	return &e.s
}

// sweep drops nodes that equal fresh ones; the next sweep comes when the
// table has doubled, so inserts stay O(1) amortised.
func (t *nodeTable) sweep(now int64) {
	for k, e := range t.m {
		if e.expires < now {
			delete(t.m, k)
		}
	}
	t.sweepAt = max(2*len(t.m), 1024)
}

// size is the number of nodes held.
func (t *nodeTable) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// path is the lock of the spends through the root key rootKey of this
// (root) rule's tree.
func (t *nodeTable) path(rootKey []byte) *sync.Mutex {
	h := uint32(2166136261) // FNV-1a
	for _, c := range rootKey {
		h = (h ^ uint32(c)) * 16777619
	}
	return &t.stripes[h%nodeStripes]
}

// nodeIdle is how long a node of rule r under parent p (nil at the root)
// may go untouched before its state equals a fresh one: its bucket and
// its guarantee refilled from the deepest debt a tree allows ((depth + 1)
// bursts), or its windows passed.
func nodeIdle(r, p *Rule) int64 {
	idle := r.Idle
	if p != nil {
		idle = max(idle, p.Idle)
	}
	return idle * (nested.MaxDepth + 1)
}
