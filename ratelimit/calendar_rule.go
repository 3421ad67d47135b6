package ratelimit

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	_ "time/tzdata" // IANA zones even where the host has no zoneinfo (scratch images)

	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// CalendarQuota is a calendar quota's period and zone (limit_type calendar);
// the quota itself is Limits.Max, per key or per override.
type CalendarQuota struct {
	Period Period
	Zone   *time.Location
	// cur caches the window last computed, so most requests find theirs
	// without converting the time into the zone.
	cur atomic.Pointer[calendarWindow]
}

// calendarWindow is one window of a CalendarQuota, in Unix ns.
type calendarWindow struct {
	start, end int64
	secs       string // its length in whole seconds, for RateLimit-Policy
	expireAt   any    // Unix ms when its Redis key may go, boxed once
}

// redisKeyMargin keeps a window's Redis key past its end, for instances
// whose clock is behind and still count in it.
const redisKeyMargin = 10 * time.Minute

// window returns the window holding the wall-clock time wall (Unix ns).
func (c *CalendarQuota) window(wall int64) *calendarWindow {
	if w := c.cur.Load(); w != nil && wall >= w.start && wall < w.end {
		return w
	}
	s, e := CalendarWindow(time.Unix(0, wall), c.Period, c.Zone)
	w := &calendarWindow{start: s.UnixNano(), end: e.UnixNano(),
		secs:     strconv.FormatInt(int64(e.Sub(s)/time.Second), 10),
		expireAt: e.Add(redisKeyMargin).UnixMilli()}
	c.cur.Store(w)
	return w
}

// wallOf is the wall-clock time (Unix ns) of an engine time: epoch's
// reading advanced by the monotonic clock, plus how far the system clock
// has moved from the monotonic one since (in whole milliseconds, so the
// two clocks' reading jitter never moves a window's edge). The monotonic
// clock stops while a VM or host is suspended: without the correction a
// clean-clone run saw an instance's midnight 14 s off the real one.
func wallOf(now int64) int64 {
	t := time.Now()
	drift := t.UnixNano() - epoch.UnixNano() - int64(t.Sub(epoch))
	return epoch.UnixNano() + now + drift/int64(time.Millisecond)*int64(time.Millisecond)
}

// parseCalendar reads quota, period and timezone. A quota makes the rule
// a calendar quota (limit_type may be left out, or be calendar); it takes
// the place of qps, which is then an error, as are period and timezone
// without a quota. It reports whether the rule is a calendar quota.
func (r *Rule) parseCalendar(f rulestore.Fields, get func(string) (string, bool)) (bool, error) {
	qv, hasQuota := get("quota")
	_, explicitType := get("limit_type")
	if !hasQuota {
		if r.Type == Calendar {
			return false, f.Errorf("quota", "required with limit_type calendar: requests per period")
		}
		for _, name := range []string{"period", "timezone"} {
			if _, ok := get(name); ok {
				return false, f.Errorf(name, "applies to calendar quotas only (give quota and period)")
			}
		}
		return false, nil
	}
	if explicitType && r.Type != Calendar {
		return false, f.Errorf("quota", "applies to limit_type calendar (a quota implies it: leave limit_type out)")
	}
	r.Type = Calendar
	if _, ok := get("qps"); ok {
		return false, f.Errorf("qps", "does not apply to a calendar quota: quota is the requests per period")
	}
	for _, name := range []string{"lease_size", "control_behavior"} {
		if _, ok := get(name); ok {
			return false, f.Errorf(name, "does not apply to a calendar quota")
		}
	}
	q, ok := syntax.ParseWhole(qv, 1, MaxBurst)
	if !ok {
		return false, f.Errorf("quota", "want a whole number %s: requests per period", syntax.Range(1, int64(MaxBurst)))
	}
	r.Limits.Max = float64(q)
	c := &CalendarQuota{Zone: time.UTC}
	pv, ok := get("period")
	if !ok {
		return false, f.Errorf("period", "required with quota: minute, hour, day, week or month")
	}
	if c.Period, ok = parsePeriod(pv); !ok {
		return false, f.Errorf("period", "want minute, hour, day, week or month")
	}
	if zv, ok := get("timezone"); ok {
		loc, err := loadZone(zv)
		if err != nil {
			return false, f.Errorf("timezone", "%v", err)
		}
		c.Zone = loc
	}
	r.Calendar = c
	return true, nil
}

// loadZone reads an IANA time zone name. Local is refused: the host's zone
// would make the same rule count differently on different machines.
func loadZone(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "local") {
		return nil, errZone(name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errZone(name)
	}
	return loc, nil
}

type errZone string

func (e errZone) Error() string {
	return "unknown time zone " + strconv.Quote(string(e)) + ": want an IANA name such as Europe/Berlin or America/New_York, or UTC"
}

// takeCalendar decides a request needing n units (spending spend now) of
// a calendar quota l in the key's entry; the count lives in the entry's
// sliding-window fields (a rule uses one engine's fields only).
func takeCalendar(ent *entry, r *Rule, l *Limits, now int64, n, spend float64, d *Decision) (ok bool, left float64) {
	wall := wallOf(now)
	w := r.Calendar.window(wall)
	c := calendarCount{start: ent.sw.start, used: ent.sw.cur}
	ok, left, d.RetryAfter = c.admit(w.start, w.end, wall, l.Max, n, spend)
	ent.sw.start, ent.sw.cur = c.start, c.used
	d.Reset, d.cal = w.end-wall, w
	return ok, left
}

// chargeCalendar settles n units to the key's count in this process. It
// reports whether this charge took the count over quota from at or under
// it (into debt).
func chargeCalendar(ent *entry, r *Rule, quota float64, now, n int64) (debt bool) {
	w := r.Calendar.window(wallOf(now))
	c := calendarCount{start: ent.sw.start, used: ent.sw.cur}
	c.advance(w.start)
	before := c.used
	c.charge(w.start, float64(n))
	ent.sw.start, ent.sw.cur = c.start, c.used
	return before <= quota && c.used > quota
}

// calendarRemaining is what key's entry has left of quota at now.
func calendarRemaining(ent *entry, r *Rule, now int64, quota float64) float64 {
	w := r.Calendar.window(wallOf(now))
	return calendarCount{start: ent.sw.start, used: ent.sw.cur}.remaining(w.start, quota)
}

// calendarPolicy is the RateLimit-Policy of a calendar decision: the quota
// and the length of the current window in seconds (86400 on most days,
// 82800 or 90000 on a day with a DST change; a month's own length).
func calendarPolicy(id string, l *Limits, w *calendarWindow) string {
	return `"` + id + `";q=` + l.quotaStr + ";w=" + w.secs
}
