package engine

import (
	"math"
	"strings"
	"time"
)

// Calendar quotas (limit_type calendar): `quota` units per calendar
// period (minute, hour, day, week or month) in a time zone, counted in
// fixed windows aligned to the calendar there. A window starts afresh at
// its boundary, whatever was spent in the one before. This file is plain
// Go: times are passed in, zones are *time.Location.

// Period is a calendar quota's window.
type Period uint8

const (
	PeriodMinute Period = iota + 1
	PeriodHour
	PeriodDay
	PeriodWeek // Monday 00:00 to the next Monday 00:00 (ISO 8601)
	PeriodMonth
)

var periodNames = [...]string{PeriodMinute: "minute", PeriodHour: "hour", PeriodDay: "day", PeriodWeek: "week", PeriodMonth: "month"}

func (p Period) String() string {
	if int(p) < len(periodNames) && p != 0 {
		return periodNames[p]
	}
	return "unknown"
}

// ParsePeriod reads minute, hour, day, week or month (case-insensitive).
func ParsePeriod(s string) (Period, bool) {
	for p, name := range periodNames {
		if p != 0 && strings.EqualFold(s, name) {
			return Period(p), true
		}
	}
	return 0, false
}

// longest is the longest window of p: a day or week with a DST change in
// it is an hour longer, a month at most 31 days (plus an hour).
func (p Period) Longest() time.Duration {
	switch p {
	case PeriodMinute:
		return time.Minute
	case PeriodHour:
		return time.Hour
	case PeriodDay:
		return 25 * time.Hour
	case PeriodWeek:
		return 7*24*time.Hour + time.Hour
	}
	return 31*24*time.Hour + time.Hour
}

// CalendarWindow returns the window [start, end) of period p in zone loc
// that holds t.
//
// Minutes and hours are those of the wall clock at t, so a zone offset
// of a half hour (Asia/Kolkata) gives hours starting at :30 UTC; each is
// exactly a minute or an hour long, and a DST change (which moves the
// wall clock by a whole hour) joins them without gap or overlap. Days,
// weeks and months run from local midnight to local midnight, so a day
// with a DST change is 23 or 25 hours long, and a month is as long as it
// is (28 to 31 days). Where a DST change skips midnight itself (e.g.
// America/Santiago), the day starts at the change.
func CalendarWindow(t time.Time, p Period, loc *time.Location) (start, end time.Time) {
	lt := t.In(loc)
	switch p {
	case PeriodMinute, PeriodHour:
		unit := int64(60)
		if p == PeriodHour {
			unit = 3600
		}
		_, off := lt.Zone()
		local := t.Unix() + int64(off)
		s := local - floorMod(local, unit) - int64(off)
		start = time.Unix(s, 0)
		return start, start.Add(time.Duration(unit) * time.Second)
	case PeriodDay:
		y, m, d := lt.Date()
		return dayStart(y, m, d, loc), dayStart(y, m, d+1, loc)
	case PeriodWeek:
		y, m, d := lt.Date()
		back := (int(lt.Weekday()) + 6) % 7 // days since Monday
		return dayStart(y, m, d-back, loc), dayStart(y, m, d-back+7, loc)
	}
	y, m, _ := lt.Date()
	return dayStart(y, m, 1, loc), dayStart(y, m+1, 1, loc)
}

// dayStart is the first instant of the local day y-m-d in loc (out-of-range
// days and months normalise, as in time.Date): its midnight, or the DST
// change that skipped midnight.
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date()
	s := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if sy, sm, sd := s.Date(); sy != y || sm != m || sd != d {
		// time.Date placed the missing midnight before the change, in
		// the day before: the day starts where that zone period ends.
		if _, next := s.ZoneBounds(); !next.IsZero() {
			s = next
		}
	}
	return s
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// calendarCount is one key's count in its calendar window: the window's
// start (Unix ns) and the units spent in it. Another window's start
// begins a fresh count. The caller serialises access.
type calendarCount struct {
	start int64
	used  float64
}

// advance moves the count to the window starting at start.
func (c *calendarCount) advance(start int64) {
	if c.start != start {
		c.start, c.used = start, 0
	}
}

// admit admits a request needing n units at now (Unix ns) in the window
// [start, end) holding quota, spending `spend` of them now (the rest is
// settled after the response, by charge). It returns whether it did, the
// whole units left afterwards, and when refused the wait in ns until the
// window ends, where a fresh one holds the whole quota (n ≤ quota is the
// parser's guarantee).
func (c *calendarCount) admit(start, end, now int64, quota, n, spend float64) (ok bool, left float64, wait int64) {
	c.advance(start)
	if c.used+n <= quota {
		c.used += spend
		return true, math.Floor(max(quota-c.used, 0)), 0
	}
	return false, math.Floor(max(quota-c.used, 0)), end - now
}

// charge counts n more units in the window starting at start (takes -n
// back when n < 0, down to none). The count may go over the quota: a debt
// that refuses requests until the window ends.
func (c *calendarCount) charge(start int64, n float64) {
	c.advance(start)
	c.used = max(c.used+n, 0)
}

// remaining is what is left of quota in the window starting at start. It
// works on a copy: reading must not move the key's window.
func (c calendarCount) remaining(start int64, quota float64) float64 {
	c.advance(start)
	return max(quota-c.used, 0)
}
