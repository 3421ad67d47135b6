package engine

import "math"

// tokenBucket is one key's token bucket: tokens refill at rate per second up
// to burst, and a request spends n of them. Times are int64 nanoseconds from
// the caller's clock, so the bucket is plain arithmetic: no clock reads, no
// allocation, 16 bytes per key. The caller serialises access.
type tokenBucket struct {
	tokens float64 // tokens held at time last
	last   int64   // ns of the last update; 0 means a new, full bucket
}

// take spends n tokens at now if the bucket holds them. It returns whether it
// did, the whole tokens left afterwards, and when refused, the wait in ns
// until n tokens will be there (assuming no other spending meanwhile).
// n must not exceed burst (the rule parser guarantees it), else the wait
// would be infinite.
func (b *tokenBucket) take(now int64, rate, burst, n float64) (ok bool, left float64, wait int64) {
	return b.admit(now, rate, burst, n, n)
}

// admit is take for a request that needs `need` tokens in the bucket but
// spends only `spend` of them now (the rest is settled after its response,
// by charge). A bucket in debt (below zero) reports 0 left.
func (b *tokenBucket) admit(now int64, rate, burst, need, spend float64) (ok bool, left float64, wait int64) {
	b.refill(now, rate, burst)
	if b.tokens >= need {
		b.tokens -= spend
		return true, math.Floor(max(b.tokens, 0)), 0
	}
	return false, math.Floor(max(b.tokens, 0)), CeilNanos((need - b.tokens) / rate)
}

// charge spends n more tokens at now (refunds -n when n < 0): the bucket
// may go below zero, a debt the refill pays back before any request can
// pass, and never above burst. It reports whether this charge took the
// bucket below zero from zero or above.
func (b *tokenBucket) charge(now int64, rate, burst, n float64) (debt bool) {
	b.refill(now, rate, burst)
	return b.chargeAsOfLast(burst, n)
}

// chargeAsOfLast is charge at the bucket's last update (a decision on it,
// never later than now), so it needs no clock: the cost is spent as if it
// had been known at that decision. It differs from charge at a later now
// only when the bucket would have filled meanwhile: the refill charge
// would throw away over burst then pays part of the charge. The bucket
// must not be new (its key was admitted on it).
func (b *tokenBucket) chargeAsOfLast(burst, n float64) (debt bool) {
	before := b.tokens
	b.tokens = min(b.tokens-n, burst)
	return before >= 0 && b.tokens < 0
}

// refill brings the bucket up to date at now. A clock that steps back (it
// cannot with a monotonic clock, but be safe) refills nothing.
func (b *tokenBucket) refill(now int64, rate, burst float64) {
	if b.last == 0 {
		b.tokens, b.last = burst, now
		return
	}
	if now > b.last {
		b.tokens += float64(now-b.last) * rate / 1e9
		b.last = now
	}
	// Also clips a bucket whose rule was just lowered.
	if b.tokens > burst {
		b.tokens = burst
	}
}

// available is the tokens the bucket holds at now. It works on a copy:
// reading must not spend or refill the key's bucket.
func (b tokenBucket) available(now int64, rate, burst float64) float64 {
	b.refill(now, rate, burst)
	return b.tokens
}

// untilFull is the wait in ns until the bucket is full again.
func (b *tokenBucket) untilFull(rate, burst float64) int64 {
	if b.tokens >= burst {
		return 0
	}
	return CeilNanos((burst - b.tokens) / rate)
}

// CeilNanos converts seconds to whole nanoseconds, rounding up.
func CeilNanos(seconds float64) int64 {
	return int64(math.Ceil(seconds * 1e9))
}
