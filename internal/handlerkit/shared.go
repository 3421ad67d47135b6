package handlerkit

import (
	"sync"

	"github.com/caddyserver/caddy/v2"
)

// Shared keeps per-rule state (buckets, breakers) by rule id across config
// generations: a reload provisions the new handlers before the old ones are
// cleaned up, so the state lives on. Every handler that uses a rule id shares
// the one value, however many routes point at it.
type Shared[T any] struct {
	pool *caddy.UsagePool
}

// NewShared makes a pool; keep one per handler package, in a package variable.
func NewShared[T any]() *Shared[T] { return &Shared[T]{pool: caddy.NewUsagePool()} }

type pooled[T any] struct{ v T }

func (p pooled[T]) Destruct() error {
	if d, ok := any(p.v).(caddy.Destructor); ok {
		return d.Destruct()
	}
	return nil
}

// Range calls f for every value some config holds now, until f returns
// false. It holds the pool's read lock: f must not provision or release.
func (s *Shared[T]) Range(f func(id string, v T) bool) {
	s.pool.Range(func(k, v any) bool { return f(k.(string), v.(pooled[T]).v) })
}

// Load returns the value some config holds for id, without taking hold
// of it (for the admin API: it walks the pool).
func (s *Shared[T]) Load(id string) (v T, ok bool) {
	s.Range(func(k string, t T) bool {
		if k == id {
			v, ok = t, true
		}
		return !ok
	})
	return v, ok
}

// Holder is one handler instance's references into a Shared pool. Get is
// lock-free once an id has been seen; Release drops every reference.
type Holder[T any] struct {
	shared *Shared[T]
	newT   func(id string) T
	onHold func(id string, v T) // nil, or see OnHold
	held   sync.Map             // id -> T
	mu     sync.Mutex
}

// Holder returns a new holder that makes missing values with newT.
func (s *Shared[T]) Holder(newT func(id string) T) *Holder[T] {
	return &Holder[T]{shared: s, newT: newT}
}

// OnHold makes h call f once for each id it takes hold of, before Get
// returns its value: e.g. to index the values a config holds. Call it
// before the first Get.
func (h *Holder[T]) OnHold(f func(id string, v T)) *Holder[T] {
	h.onHold = f
	return h
}

// Get returns the shared value for id, creating it on first use.
func (h *Holder[T]) Get(id string) T {
	if v, ok := h.held.Load(id); ok {
		return v.(T)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.held.Load(id); ok {
		return v.(T)
	}
	v, _, _ := h.shared.pool.LoadOrNew(id, func() (caddy.Destructor, error) {
		return pooled[T]{h.newT(id)}, nil
	})
	t := v.(pooled[T]).v
	if h.onHold != nil {
		h.onHold(id, t)
	}
	h.held.Store(id, t)
	return t
}

// Release drops this holder's references; call it from Cleanup.
func (h *Holder[T]) Release() {
	h.held.Range(func(k, _ any) bool {
		h.shared.pool.Delete(k)
		h.held.Delete(k)
		return true
	})
}
