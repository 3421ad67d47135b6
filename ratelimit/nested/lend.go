package nested

import "github.com/sluicegw/sluice/ratelimit/engine"

// link is one child's spend at its parent, as lend decides it.
type link struct {
	c, p  *State // the child's and the parent's refreshed states
	g     float64
	pl    *Limit // the parent's ceiling
	share *Limit // what the parent's children's guarantees are shares of
	// backed, pbacked: the child (the parent) hands its own guarantee
	// down to its children, so their unclaimed guarantees (calendar) are
	// backed by it.
	backed, pbacked bool
	// chained: the child's spend was all within its own child's
	// guarantee, so it comes before the child's borrowing spends.
	chained bool
	// height is the child's level above the leaf (0 for the leaf): the
	// bounds of the debts below scale with it.
	height int
}

// slack absorbs float rounding in the debt floors' comparisons.
const slack = 1e-9

// grant brings the child's guarantee up to now; the parent's own must be
// up to date (decide grants from the root down). Under a token bucket
// parent it is a bucket of its own, refilling at g of the share's rate up
// to g of its burst (full when new). Under a calendar parent it is
// granted once per window, when the child first spends in it: g of the
// share's quota, or what the parent has left that no one used or
// reserved if that is less, and, when the parent hands its guarantee
// down, what is left of that guarantee that its children have not
// reserved. The parent reserves it until the child claims it or the
// window ends.
func (k *link) grant(now int64) {
	c, p := k.c, k.p
	if k.pl.Calendar == nil {
		b := engine.Bucket{Tokens: c.GLeft, Last: c.GAt}
		b.Refill(now, k.g*k.share.QPS, k.g*k.share.Burst)
		c.GLeft, c.GAt = b.Tokens, b.Last
		return
	}
	if c.GAt != p.At {
		left := min(k.g*k.share.Quota, max(p.free(k.pl), 0))
		if k.pbacked {
			left = min(left, max(p.GLeft-p.Reserved, 0))
		}
		c.GAt, c.GLeft, c.GUsed = p.At, left, 0
		p.Reserved += left
	}
}

// guaranteed is the part of a spend of n within the child's guarantee.
// A chained spend under a bucket parent may take the guarantee into debt,
// down to minus its burst times its height: the child's children's
// guarantees add up to at most the child's own, and each may be in debt
// by as much one level down, which bounds it (the design note). A spend
// the child borrowed under a calendar parent leaves what its children
// reserved.
func (k *link) guaranteed(n float64) float64 {
	c := k.c
	if k.pl.Calendar == nil {
		floor := float64(k.height) * k.g * k.share.Burst
		if k.chained && c.GLeft-n >= -floor-slack {
			return n
		}
		return min(n, max(c.GLeft, 0))
	}
	if k.backed && !k.chained {
		return min(n, max(c.GLeft-c.Reserved, 0))
	}
	return min(n, max(c.GLeft, 0))
}

// lend decides the child's spend of n at its parent, its guarantee
// granted: the part within
// the child's guarantee is always allowed (a bucket parent may go into
// debt for it, down to minus its burst times its height; a calendar
// parent reserved it); the rest is borrowed, only from what the parent holds unused (in a
// calendar, also not reserved for the child's siblings). It records the
// parts in lv. When the parent refuses, it returns a hint of the wait in
// ns until it would not.
func (k *link) lend(n float64, now int64, lv *Level) (ok bool, wait int64) {
	c, p, pl := k.c, k.p, k.pl
	guaranteed := k.guaranteed(n)
	borrowed := n - guaranteed
	if n > 0 {
		if pl.Calendar != nil {
			if borrowed > 0 && p.free(pl) < borrowed {
				return false, p.wait(pl, 0, now)
			}
		} else if borrowed > 0 && p.Level < n {
			// Borrowing leaves the bucket out of debt: the debt is the
			// guarantees' alone, which bounds it (the design note).
			return false, min(p.wait(pl, n, now), k.guaranteeWait(n))
		} else if floor := float64(k.height+1) * pl.Burst; borrowed <= 0 && p.Level-n < -floor-slack {
			return false, p.wait(pl, n-floor, now)
		}
	}
	c.GLeft -= guaranteed
	if pl.Calendar != nil {
		c.GUsed += guaranteed
	}
	p.spend(pl, n, guaranteed)
	lv.Guaranteed, lv.Borrowed = guaranteed, borrowed
	return true, 0
}

// guaranteeWait is the ns until the child's guarantee at a bucket parent
// holds n (never, without a guarantee).
func (k *link) guaranteeWait(n float64) int64 {
	rate, burst := k.g*k.share.QPS, k.g*k.share.Burst
	if rate <= 0 || n > burst {
		return 1<<63 - 1
	}
	return engine.CeilNanos((n - k.c.GLeft) / rate)
}
