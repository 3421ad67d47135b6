// Package missing keeps the rules handlers ask for and the store does not
// hold, for the rulestore app of one config: since when each is missing,
// and its warnings, queued by the request that finds it missing and
// logged off the request's path. The store lists them in /sluice/state
// and counts them in sluice_rules_invalid.
//
// It owns:
//
//   - the missing references and since when each is missing (missing.go);
//   - the warning of a request that finds one missing: queued, bounded,
//     at most one per id per WarnEvery (missing.go);
//   - forgetting the references that arrived (missing.go).
package missing

import (
	"sync"
	"sync/atomic"
	"time"
)

// WarnEvery bounds the warnings for one missing reference that may
// arrive later (with Redis; without Redis a missing id fails validation,
// so one warning is enough).
const WarnEvery = time.Minute

// QueueSize bounds the warnings waiting to be logged; a request that finds
// the queue full leaves its warning to a later request.
const QueueSize = 1024

// Tracker holds the missing references of type K. The zero value lists
// them; Open readies its queue of warnings.
type Tracker[K comparable] struct {
	refs  sync.Map // K -> *entry
	warns chan Warning[K]
}

// entry is a reference a handler asked for and did not find.
type entry struct {
	since    time.Time
	lastWarn atomic.Int64 // unix ns
}

// Warning is a warning about a missing reference, queued by a request.
type Warning[K comparable] struct {
	Ref   K
	Msg   string
	Since time.Time
}

// Open readies the queue of warnings; before it, warnings are dropped.
func (t *Tracker[K]) Open() { t.warns = make(chan Warning[K], QueueSize) }

// Note lists ref as missing (since now, if it was not already) without a
// warning.
func (t *Tracker[K]) Note(ref K) { t.note(ref) }

func (t *Tracker[K]) note(ref K) *entry {
	v, ok := t.refs.Load(ref)
	if !ok {
		v, _ = t.refs.LoadOrStore(ref, &entry{since: time.Now().UTC()})
	}
	return v.(*entry)
}

// Warn notes ref and queues a warning with msg: once, or when repeat at
// most once per WarnEvery.
func (t *Tracker[K]) Warn(ref K, msg string, repeat bool) {
	m := t.note(ref)
	now := time.Now().UnixNano()
	last := m.lastWarn.Load()
	if last != 0 && (!repeat || now-last < int64(WarnEvery)) {
		return
	}
	if m.lastWarn.CompareAndSwap(last, now) {
		select {
		case t.warns <- Warning[K]{ref, msg, m.since}:
		default:
			m.lastWarn.Store(last) // queue full: a later request warns
		}
	}
}

// Warnings are the queued warnings, for the goroutine that logs them.
func (t *Tracker[K]) Warnings() <-chan Warning[K] { return t.warns }

// Range calls fn with each missing reference and since when it is
// missing, dropping those held reports as arrived.
func (t *Tracker[K]) Range(held func(K) bool, fn func(ref K, since time.Time)) {
	t.refs.Range(func(key, value any) bool {
		ref := key.(K)
		if held(ref) {
			t.refs.Delete(key) // arrived since
			return true
		}
		fn(ref, value.(*entry).since)
		return true
	})
}

// Forget drops the references held reports as arrived.
func (t *Tracker[K]) Forget(held func(K) bool) {
	t.Range(held, func(K, time.Time) {})
}
