package engine

// Bucket is a token bucket's state for a package that decides on its
// level itself (ratelimit/nested, whose parents may go into bounded debt
// for their children's guarantees). It refills as a key's bucket does: a
// zero Last is a new, full bucket; a clock that steps back refills
// nothing; a lowered burst clips it. Tokens below zero are a debt that
// the refill pays back first.
type Bucket struct {
	Tokens float64 // tokens held at Last (below zero: owed)
	Last   int64   // ns of the last refill; 0: new and full
}

// Refill brings b up to date at now for rate (tokens per second) and
// burst.
func (b *Bucket) Refill(now int64, rate, burst float64) {
	tb := tokenBucket{tokens: b.Tokens, last: b.Last}
	tb.refill(now, rate, burst)
	b.Tokens, b.Last = tb.tokens, tb.last
}
