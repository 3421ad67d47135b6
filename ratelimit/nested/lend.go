package nested

import "github.com/sluicegw/sluice/ratelimit/engine"

// grant brings child c's guarantee g at its refreshed parent p up to now.
// Under a token bucket parent it is a bucket of its own, refilling at g
// of p's rate up to g of p's burst (full when new). Under a calendar
// parent it is granted once per window, when c first spends in it: g of
// p's quota, or what p has left that no one used or reserved if that is
// less; p reserves it until c claims it or the window ends.
func grant(c *State, g float64, p *State, pl *Limit, now int64) {
	if pl.Calendar == nil {
		b := engine.Bucket{Tokens: c.GLeft, Last: c.GAt}
		b.Refill(now, g*pl.QPS, g*pl.Burst)
		c.GLeft, c.GAt = b.Tokens, b.Last
		return
	}
	if c.GAt != p.At {
		left := min(g*pl.Quota, max(p.free(pl), 0))
		c.GAt, c.GLeft, c.GUsed = p.At, left, 0
		p.Reserved += left
	}
}

// lend decides child c's spend of n at its refreshed parent p: the part
// within c's guarantee is always allowed (a bucket parent may go into
// debt for it, down to minus its burst; a calendar parent reserved it);
// the rest is borrowed, only from what p holds unused (in a calendar,
// also not reserved for c's siblings). It records the parts in lv. When
// p refuses, it returns a hint of the wait in ns until it would not.
func lend(c *State, g float64, p *State, pl *Limit, n float64, now int64, lv *Level) (ok bool, wait int64) {
	grant(c, g, p, pl, now)
	guaranteed := min(n, max(c.GLeft, 0))
	borrowed := n - guaranteed
	if n > 0 {
		if pl.Calendar != nil {
			if borrowed > 0 && p.free(pl) < borrowed {
				return false, p.wait(pl, 0, now)
			}
		} else if borrowed > 0 && p.Level < n {
			// Borrowing leaves the bucket out of debt: the debt is the
			// guarantees' alone, which bounds it (the design note).
			return false, min(p.wait(pl, n, now), guaranteeWait(c, g, pl, n))
		} else if borrowed <= 0 && p.Level-n < -pl.Burst {
			return false, p.wait(pl, n-pl.Burst, now)
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

// guaranteeWait is the ns until c's guarantee at a bucket parent holds n
// (never, without a guarantee).
func guaranteeWait(c *State, g float64, pl *Limit, n float64) int64 {
	if g <= 0 || n > g*pl.Burst {
		return 1<<63 - 1
	}
	return engine.CeilNanos((n - c.GLeft) / (g * pl.QPS))
}
