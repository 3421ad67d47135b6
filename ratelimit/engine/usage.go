package engine

import "sort"

// Reading the keys' use of their quota, for the admin API and events:
// from outside the request path, and without changing any key's state.

// KeyUse is one key's use of its quota at a moment.
type KeyUse struct {
	Key       string  // as the table holds it (not masked)
	Remaining float64 // tokens or requests left
	Used      float64 // share of the quota in use, 0..1
	Limited   bool    // a request of the rule's cost would be refused now
}

// use reads the quota of e, key's entry, under rule r at now; e's shard is
// locked. The key is left for the caller to copy if it keeps the use.
func (e *entry) use(r *Spec, now int64, key []byte) KeyUse {
	l := &r.Limits
	if o := r.Overrides[string(key)]; o != nil {
		l = o
	}
	var left, quota float64
	if r.Type == Calendar {
		left, quota = calendarRemaining(e, r, now, l.Max), l.Max
	} else if r.Type == SlidingWindow {
		left, quota = e.sw.remaining(now, l.Window, l.Max), l.Max
	} else {
		left, quota = e.tb.available(now, l.QPS, l.Burst), l.Burst
	}
	u := KeyUse{Remaining: left, Limited: left < float64(r.Cost)}
	if quota > 0 {
		u.Used = min(max(1-left/quota, 0), 1)
	}
	return u
}

// TopKeys returns the n keys using most of their quota at now, most used
// first (the first seen among equals). An engine counting in-flight slots
// only holds no quota: none.
func (e *Local) TopKeys(r *Spec, now int64, n int) []KeyUse {
	if e.slotsOnly {
		return nil
	}
	var top []KeyUse
	e.tab.scan(func(ent *entry, key []byte) {
		u := ent.use(r, now, key)
		if len(top) < n || u.Used > top[len(top)-1].Used {
			u.Key = string(key)
			pos := sort.Search(len(top), func(j int) bool { return top[j].Used < u.Used })
			top = append(top[:pos], append([]KeyUse{u}, top[pos:]...)...)
			if len(top) > n {
				top = top[:n]
			}
		}
	})
	return top
}
