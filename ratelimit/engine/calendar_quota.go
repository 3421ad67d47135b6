package engine

import (
	"strconv"
	"sync/atomic"
	"time"
)

// CalendarQuota is a calendar quota's period and zone (limit_type calendar);
// the quota itself is Limits.Max, per key or per override.
type CalendarQuota struct {
	Period Period
	Zone   *time.Location
	// cur caches the window last computed, so most requests find theirs
	// without converting the time into the zone.
	cur atomic.Pointer[Window]
}

// Window is one window of a CalendarQuota, in Unix ns.
type Window struct {
	Start, End int64
	Secs       string // its length in whole seconds, for RateLimit-Policy
	ExpireAt   any    // Unix ms when its Redis key may go, boxed once
}

// redisKeyMargin keeps a window's Redis key past its end, for instances
// whose clock is behind and still count in it.
const redisKeyMargin = 10 * time.Minute

// Window returns the window holding the wall-clock time wall (Unix ns).
func (c *CalendarQuota) Window(wall int64) *Window {
	if w := c.cur.Load(); w != nil && wall >= w.Start && wall < w.End {
		return w
	}
	s, e := CalendarWindow(time.Unix(0, wall), c.Period, c.Zone)
	w := &Window{Start: s.UnixNano(), End: e.UnixNano(),
		Secs:     strconv.FormatInt(int64(e.Sub(s)/time.Second), 10),
		ExpireAt: e.Add(redisKeyMargin).UnixMilli()}
	c.cur.Store(w)
	return w
}

// Wall is the wall-clock time (Unix ns) of an engine time: epoch's
// reading advanced by the monotonic clock, plus how far the system clock
// has moved from the monotonic one since (in whole milliseconds, so the
// two clocks' reading jitter never moves a window's edge). The monotonic
// clock stops while a VM or host is suspended: without the correction a
// clean-clone run saw an instance's midnight 14 s off the real one.
func Wall(now int64) int64 {
	t := time.Now()
	drift := t.UnixNano() - epoch.UnixNano() - int64(t.Sub(epoch))
	return epoch.UnixNano() + now + drift/int64(time.Millisecond)*int64(time.Millisecond)
}

// takeCalendar decides a request needing n units (spending spend now) of
// a calendar quota l in the key's entry; the count lives in the entry's
// sliding-window fields (a rule uses one engine's fields only).
func takeCalendar(ent *entry, r *Spec, l *Limits, now int64, n, spend float64, d *Decision) (ok bool, left float64) {
	wall := Wall(now)
	w := r.Calendar.Window(wall)
	c := calendarCount{start: ent.sw.start, used: ent.sw.cur}
	ok, left, d.RetryAfter = c.admit(w.Start, w.End, wall, l.Max, n, spend)
	ent.sw.start, ent.sw.cur = c.start, c.used
	d.Reset, d.Cal = w.End-wall, w
	return ok, left
}

// chargeCalendar settles n units to the key's count in this process. It
// reports whether this charge took the count over quota from at or under
// it (into debt).
func chargeCalendar(ent *entry, r *Spec, quota float64, now, n int64) (debt bool) {
	w := r.Calendar.Window(Wall(now))
	c := calendarCount{start: ent.sw.start, used: ent.sw.cur}
	c.advance(w.Start)
	before := c.used
	c.charge(w.Start, float64(n))
	ent.sw.start, ent.sw.cur = c.start, c.used
	return before <= quota && c.used > quota
}

// calendarRemaining is what key's entry has left of quota at now.
func calendarRemaining(ent *entry, r *Spec, now int64, quota float64) float64 {
	w := r.Calendar.Window(Wall(now))
	return calendarCount{start: ent.sw.start, used: ent.sw.cur}.remaining(w.Start, quota)
}
