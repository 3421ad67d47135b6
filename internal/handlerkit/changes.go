package handlerkit

import (
	"sync/atomic"

	"github.com/sluicegw/sluice/rulestore"
)

// ByChanges keeps a value worked out from the store's rules (the rule a
// handler applies, a handler's rule list) with the store's count of
// changes (rulestore.App.Changes): while the count stays the same a request
// reads that one counter, and after any change the value is worked out
// again from the handles, never the store's maps.
type ByChanges[T any] struct {
	app     *rulestore.App
	resolve func() T
	held    atomic.Pointer[atChanges[T]]
}

// atChanges is the value at one count of changes; never changed once
// stored, so requests share it without a lock.
type atChanges[T any] struct {
	changes uint64
	v       T
}

// Init makes c keep what resolve returns, worked out again after each
// change to app's rules. Call it before the first Get.
func (c *ByChanges[T]) Init(app *rulestore.App, resolve func() T) {
	c.app, c.resolve = app, resolve
}

// Get returns the value for the rules as the store holds them now.
func (c *ByChanges[T]) Get() *T {
	n := c.app.Changes() // before resolving: a change after this is re-read next time
	if h := c.held.Load(); h != nil && h.changes == n {
		return &h.v
	}
	return c.refresh(n)
}

// refresh works the value out at count n (kept out of Get, so Get is
// small enough to inline).
func (c *ByChanges[T]) refresh(n uint64) *T {
	h := &atChanges[T]{changes: n, v: c.resolve()}
	c.held.Store(h)
	return &h.v
}

// Last returns the value Get returned last, nil before the first Get.
func (c *ByChanges[T]) Last() *T {
	if h := c.held.Load(); h != nil {
		return &h.v
	}
	return nil
}
