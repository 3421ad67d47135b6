package rulestore

import (
	"sort"
	"sync"
)

// registry holds what handler packages register from their init functions
// (state sections, actions, views, status queries), as caddy.RegisterModule
// fills Caddy's module list: an exception to "no package-level mutable
// state", since it holds code, not config, and every config serves the
// same entries.
type registry[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

func (r *registry[T]) put(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]T{}
	}
	r.m[name] = v
}

func (r *registry[T]) get(name string) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[name]
}

// sorted returns the entries' names in order and the entries by name, a
// copy taken under the lock.
func (r *registry[T]) sorted() ([]string, map[string]T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.m))
	byName := make(map[string]T, len(r.m))
	for name, v := range r.m {
		names = append(names, name)
		byName[name] = v
	}
	sort.Strings(names)
	return names, byName
}
