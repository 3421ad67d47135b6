package engine

import "math"

// slidingWindow is one key's sliding-window counter: two fixed windows (the
// current one and the one before), the previous count weighted by how much
// of it still overlaps the sliding window ending now:
//
//	estimate = prev × (size − elapsed)/size + cur
//
// A request of cost n is admitted when estimate + n ≤ limit. This is O(1)
// per key (24 bytes), not a timestamp log.
//
// Error: the estimate assumes the previous window's requests were spread
// evenly over it. Each fixed window never admits more than limit (cur alone
// is bounded by it), so a sliding window of length size holds at most
// 2×limit admitted requests in the worst case (a full previous window whose
// requests all came at its very end, then a full current window). When
// traffic is even within each window the estimate is exact; on random
// traffic the tests measure it against an exact log (slidingwindow_test.go).
type slidingWindow struct {
	start     int64 // ns start of the current fixed window (a multiple of size)
	cur, prev float64
}

// take admits a request of cost n at now when it fits in limit per size ns.
// It returns whether it did, the whole units left afterwards, and when
// refused the wait in ns until it would fit (assuming no other traffic).
func (w *slidingWindow) take(now, size int64, limit, n float64) (ok bool, left float64, wait int64) {
	return w.admit(now, size, limit, n, n)
}

// admit is take for a request that needs room for `n` units but spends
// only `spend` of them now (the rest is settled after its response, by
// charge).
func (w *slidingWindow) admit(now, size int64, limit, n, spend float64) (ok bool, left float64, wait int64) {
	w.advance(now, size)
	est := w.estimate(now, size)
	if est+n <= limit {
		w.cur += spend
		return true, math.Floor(limit - est - spend), 0
	}
	left = math.Max(0, math.Floor(limit-est))
	// The estimate falls as the previous window slides out.
	if room := limit - n - w.cur; room >= 0 && w.prev > 0 {
		// prev × weight(t) ≤ room  ⇔  t ≥ start + size × (1 − room/prev)
		at := float64(w.start) + float64(size)*(1-room/w.prev)
		return false, left, int64(math.Ceil(at)) - now
	}
	// Not before the next window, where cur becomes prev with weight ≤ 1:
	// cur × (1 − x) ≤ limit − n  ⇔  x ≥ 1 − (limit − n)/cur.
	at := float64(w.start+size) + float64(size)*(1-(limit-n)/w.cur)
	return false, left, int64(math.Ceil(at)) - now
}

// estimate is the weighted count of the sliding window ending at now; the
// fixed windows must have been advanced to now.
func (w *slidingWindow) estimate(now, size int64) float64 {
	weight := float64(size-(now-w.start)) / float64(size)
	return w.prev*weight + w.cur
}

// remaining is what a request could take at now without being refused.
// It works on a copy: reading must not move the key's window.
func (w slidingWindow) remaining(now, size int64, limit float64) float64 {
	w.advance(now, size)
	return max(limit-w.estimate(now, size), 0)
}

// advance rolls the fixed windows forward to the one holding now.
func (w *slidingWindow) advance(now, size int64) {
	start := now - now%size
	if start == w.start {
		return
	}
	if start-w.start == size {
		w.prev = w.cur
	} else {
		w.prev = 0 // a gap of a whole window or more: nothing overlaps
	}
	w.cur, w.start = 0, start
}

// untilWindowEnd is the wait in ns until the current fixed window ends.
func (w *slidingWindow) untilWindowEnd(now, size int64) int64 {
	return w.start + size - now
}

// charge counts n more units in the current window at now (takes -n back
// when n < 0, down to none). The window may go over its limit: a debt that
// refuses requests until it slides out. It reports whether this charge
// took the window's estimate over limit from at or under it (into debt).
func (w *slidingWindow) charge(now, size int64, limit, n float64) (debt bool) {
	w.advance(now, size)
	before := w.estimate(now, size)
	w.cur = max(w.cur+n, 0)
	return before <= limit && w.estimate(now, size) > limit
}
