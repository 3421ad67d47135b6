package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// at is a wall-clock time in loc.
func at(loc *time.Location, y int, m time.Month, d, h, min int) time.Time {
	return time.Date(y, m, d, h, min, 0, 0, loc)
}

// Windows of every period across DST changes, month lengths and weeks:
// start and end in the zone, and their length.
func TestCalendarWindow(t *testing.T) {
	ny, berlin, kolkata := zone(t, "America/New_York"), zone(t, "Europe/Berlin"), zone(t, "Asia/Kolkata")
	cases := []struct {
		name       string
		t          time.Time
		p          Period
		loc        *time.Location
		start, end time.Time
		length     time.Duration
	}{
		{"NY spring-forward day is 23h", at(ny, 2026, 3, 8, 12, 0), PeriodDay, ny, at(ny, 2026, 3, 8, 0, 0), at(ny, 2026, 3, 9, 0, 0), 23 * time.Hour},
		{"NY fall-back day is 25h", at(ny, 2026, 11, 1, 23, 59), PeriodDay, ny, at(ny, 2026, 11, 1, 0, 0), at(ny, 2026, 11, 2, 0, 0), 25 * time.Hour},
		{"NY day before the change", at(ny, 2026, 3, 7, 23, 59), PeriodDay, ny, at(ny, 2026, 3, 7, 0, 0), at(ny, 2026, 3, 8, 0, 0), 24 * time.Hour},
		{"Berlin spring-forward day", at(berlin, 2026, 3, 29, 1, 30), PeriodDay, berlin, at(berlin, 2026, 3, 29, 0, 0), at(berlin, 2026, 3, 30, 0, 0), 23 * time.Hour},
		{"Berlin fall-back day", at(berlin, 2026, 10, 25, 4, 0), PeriodDay, berlin, at(berlin, 2026, 10, 25, 0, 0), at(berlin, 2026, 10, 26, 0, 0), 25 * time.Hour},
		{"NY hour before spring-forward ends at 03:00 EDT", at(ny, 2026, 3, 8, 1, 30), PeriodHour, ny, at(ny, 2026, 3, 8, 1, 0), at(ny, 2026, 3, 8, 3, 0), time.Hour},
		{"Kolkata hours start at :30 UTC", time.Date(2026, 1, 1, 10, 10, 0, 0, time.UTC), PeriodHour, kolkata, time.Date(2026, 1, 1, 9, 30, 0, 0, time.UTC), time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC), time.Hour},
		{"minute", time.Date(2026, 1, 1, 10, 10, 59, 999, time.UTC), PeriodMinute, berlin, time.Date(2026, 1, 1, 10, 10, 0, 0, time.UTC), time.Date(2026, 1, 1, 10, 11, 0, 0, time.UTC), time.Minute},
		{"January has 31 days", at(berlin, 2026, 1, 31, 23, 59), PeriodMonth, berlin, at(berlin, 2026, 1, 1, 0, 0), at(berlin, 2026, 2, 1, 0, 0), 31 * 24 * time.Hour},
		{"February 2026 has 28", at(time.UTC, 2026, 2, 28, 23, 59), PeriodMonth, time.UTC, at(time.UTC, 2026, 2, 1, 0, 0), at(time.UTC, 2026, 3, 1, 0, 0), 28 * 24 * time.Hour},
		{"February 2028 has 29", at(time.UTC, 2028, 2, 29, 12, 0), PeriodMonth, time.UTC, at(time.UTC, 2028, 2, 1, 0, 0), at(time.UTC, 2028, 3, 1, 0, 0), 29 * 24 * time.Hour},
		{"Feb 29 is a day of its own", at(time.UTC, 2028, 2, 29, 12, 0), PeriodDay, time.UTC, at(time.UTC, 2028, 2, 29, 0, 0), at(time.UTC, 2028, 3, 1, 0, 0), 24 * time.Hour},
		{"Berlin March has the short day", at(berlin, 2026, 3, 15, 0, 0), PeriodMonth, berlin, at(berlin, 2026, 3, 1, 0, 0), at(berlin, 2026, 4, 1, 0, 0), 31*24*time.Hour - time.Hour},
		{"December into the new year", at(ny, 2026, 12, 31, 23, 59), PeriodMonth, ny, at(ny, 2026, 12, 1, 0, 0), at(ny, 2027, 1, 1, 0, 0), 31 * 24 * time.Hour},
		// 2026-03-04 is a Wednesday; the week runs Monday 2 to Monday 9,
		// with New York's spring-forward in it.
		{"week from Monday", at(ny, 2026, 3, 4, 9, 0), PeriodWeek, ny, at(ny, 2026, 3, 2, 0, 0), at(ny, 2026, 3, 9, 0, 0), 7*24*time.Hour - time.Hour},
		{"Sunday is the week's last day", at(ny, 2026, 3, 8, 23, 59), PeriodWeek, ny, at(ny, 2026, 3, 2, 0, 0), at(ny, 2026, 3, 9, 0, 0), 7*24*time.Hour - time.Hour},
		{"Monday 00:00 starts the next", at(ny, 2026, 3, 9, 0, 0), PeriodWeek, ny, at(ny, 2026, 3, 9, 0, 0), at(ny, 2026, 3, 16, 0, 0), 7 * 24 * time.Hour},
		{"week across a month and year", at(time.UTC, 2026, 12, 31, 0, 0), PeriodWeek, time.UTC, at(time.UTC, 2026, 12, 28, 0, 0), at(time.UTC, 2027, 1, 4, 0, 0), 7 * 24 * time.Hour},
	}
	for _, c := range cases {
		s, e := CalendarWindow(c.t, c.p, c.loc)
		if !s.Equal(c.start) || !e.Equal(c.end) || e.Sub(s) != c.length {
			t.Errorf("%s: %v holds [%v, %v) of %v, want [%v, %v) of %v", c.name, c.t, s, e, e.Sub(s), c.start, c.end, c.length)
		}
		if c.t.Before(s) || !c.t.Before(e) {
			t.Errorf("%s: %v outside its window [%v, %v)", c.name, c.t, s, e)
		}
	}
}

// Windows tile time: walking any zone's calendar window by window over
// two years, each starts where the last ended, and a day starts at local
// midnight or, where a DST change skips midnight, at the change.
func TestCalendarWindowsTile(t *testing.T) {
	for _, name := range []string{"UTC", "America/New_York", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "Asia/Kolkata"} {
		loc := zone(t, name)
		for _, p := range []Period{PeriodDay, PeriodWeek, PeriodMonth} {
			s, e := CalendarWindow(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), p, loc)
			for range 800 {
				ns, ne := CalendarWindow(e, p, loc)
				if !ns.Equal(e) || !ne.After(ns) || ne.Sub(ns) > p.longest() {
					t.Fatalf("%s %s: after [%v, %v) comes [%v, %v)", name, p, s, e, ns, ne)
				}
				if h, m, _ := ns.In(loc).Clock(); (h != 0 || m != 0) && ns.Add(-time.Nanosecond).In(loc).Day() == ns.In(loc).Day() {
					t.Fatalf("%s %s: window starts at %v, not a day's first instant", name, p, ns.In(loc))
				}
				s, e = ns, ne
			}
		}
	}
	// 2026-09-06 00:00 does not exist in Santiago (clocks go to 01:00).
	san := zone(t, "America/Santiago")
	s, _ := CalendarWindow(time.Date(2026, 9, 6, 12, 0, 0, 0, san), PeriodDay, san)
	if h, _, _ := s.In(san).Clock(); s.In(san).Day() != 6 || h != 1 {
		t.Errorf("Santiago 2026-09-06 starts at %v, want 01:00 that day", s.In(san))
	}
}

// The count: a quota per window, a fresh one at the boundary, a refusal
// waiting exactly until it; charges settle into the window and may leave
// a debt until its end.
func TestCalendarCount(t *testing.T) {
	var c calendarCount
	const start, end = int64(1000), int64(5000)
	for i := 0; i < 3; i++ {
		if ok, left, _ := c.admit(start, end, 1000+int64(i), 3, 1, 1); !ok || left != float64(2-i) {
			t.Fatalf("request %d: ok %v left %v", i+1, ok, left)
		}
	}
	if ok, left, wait := c.admit(start, end, 4000, 3, 1, 1); ok || left != 0 || wait != 1000 {
		t.Fatalf("4th: ok %v left %v wait %d, want refused, 0, 1000", ok, left, wait)
	}
	if ok, left, _ := c.admit(end, end+4000, end, 3, 1, 1); !ok || left != 2 {
		t.Fatalf("next window: ok %v left %v", ok, left)
	}
	// cost 2 of 3: a second one does not fit, a cost of 1 does.
	c = calendarCount{}
	c.admit(start, end, start, 3, 2, 2)
	if ok, _, _ := c.admit(start, end, start, 3, 2, 2); ok {
		t.Fatal("cost 2 admitted with 1 left")
	}
	if ok, left, _ := c.admit(start, end, start, 3, 1, 1); !ok || left != 0 {
		t.Fatalf("cost 1: ok %v left %v", ok, left)
	}
	// count_status: admitted spending nothing, charged after; a debt.
	c = calendarCount{}
	c.admit(start, end, start, 3, 1, 0)
	c.charge(start, 5)
	if ok, left, wait := c.admit(start, end, 2000, 3, 1, 0); ok || left != 0 || wait != 3000 {
		t.Fatalf("in debt: ok %v left %v wait %d", ok, left, wait)
	}
	if r := c.remaining(end, 3); r != 3 {
		t.Fatalf("remaining in the next window %v, want 3", r)
	}
	c.charge(start, -10)
	if c.used != 0 {
		t.Fatalf("refund below zero: used %v", c.used)
	}
}

// engineAt is the engine time of a wall-clock instant.
func engineAt(t time.Time) int64 { return int64(t.Sub(epoch)) }

func calRule(t *testing.T, fields ...string) *Rule {
	t.Helper()
	f := rulestore.Fields{}
	for i := 0; i < len(fields); i += 2 {
		f[fields[i]] = fields[i+1]
	}
	r, err := ParseRule("cal", f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The local engine on a simulated clock: 3 a day in New York over the
// spring-forward and fall-back days, the refusal's wait and reset the time
// to local midnight, the policy window the day's real length.
func TestCalendarEngineAcrossDST(t *testing.T) {
	ny := zone(t, "America/New_York")
	r := calRule(t, "quota", "3", "period", "day", "timezone", "America/New_York", "key_resolver", "global")
	e := newLocalEngine(r)
	for _, day := range []struct {
		d      int
		m      time.Month
		length string
	}{{7, 3, "86400"}, {8, 3, "82800"}, {9, 3, "86400"}, {1, 11, "90000"}} {
		noon := at(ny, 2026, day.m, day.d, 12, 0)
		key := []byte(noon.String())
		for i := 0; i < 3; i++ {
			if d := e.Take(r, key, engineAt(noon)); !d.OK() || d.Remaining != int64(2-i) {
				t.Fatalf("%v request %d: %v remaining %d", noon, i+1, d.Reason, d.Remaining)
			}
		}
		d := e.Take(r, key, engineAt(noon))
		midnight := at(ny, 2026, day.m, day.d+1, 0, 0)
		if d.OK() || d.RetryAfter != int64(midnight.Sub(noon)) || d.Reset != d.RetryAfter {
			t.Fatalf("%v 4th: %v retry %v reset %v, want refused until %v (%v)", noon, d.Reason,
				time.Duration(d.RetryAfter), time.Duration(d.Reset), midnight, midnight.Sub(noon))
		}
		if d.cal == nil || d.cal.secs != day.length {
			t.Fatalf("%v: window %+v, want %s s", noon, d.cal, day.length)
		}
		// One ns before midnight still refused; at midnight a fresh day.
		if d := e.Take(r, key, engineAt(midnight.Add(-time.Nanosecond))); d.OK() {
			t.Fatalf("%v: admitted 1 ns before midnight", midnight)
		}
		if d := e.Take(r, key, engineAt(midnight)); !d.OK() || d.Remaining != 2 {
			t.Fatalf("%v: at midnight %v remaining %d", midnight, d.Reason, d.Remaining)
		}
	}
}

// Month boundaries in Berlin: January 31 to February, February 28 to
// March (2026) and February 29 (2028); overrides keep their own quota.
func TestCalendarEngineMonths(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	r := calRule(t, "quota", "2", "period", "month", "timezone", "Europe/Berlin", "overrides", "big=5")
	e := newLocalEngine(r)
	for _, c := range []struct{ last, next time.Time }{
		{at(berlin, 2026, 1, 31, 23, 59), at(berlin, 2026, 2, 1, 0, 0)},
		{at(berlin, 2026, 2, 28, 23, 59), at(berlin, 2026, 3, 1, 0, 0)},
		{at(berlin, 2028, 2, 29, 23, 59), at(berlin, 2028, 3, 1, 0, 0)},
	} {
		k := []byte("user:" + c.last.Format("2006-01"))
		e.Take(r, k, engineAt(c.last))
		e.Take(r, k, engineAt(c.last))
		if d := e.Take(r, k, engineAt(c.last)); d.OK() || d.RetryAfter != int64(time.Minute) {
			t.Fatalf("%v: %v retry %v, want refused for 1m", c.last, d.Reason, time.Duration(d.RetryAfter))
		}
		if d := e.Take(r, k, engineAt(c.next)); !d.OK() || d.Remaining != 1 {
			t.Fatalf("%v: %v remaining %d", c.next, d.Reason, d.Remaining)
		}
	}
	big := []byte("big")
	for i := 0; i < 5; i++ {
		if d := e.Take(r, big, engineAt(at(berlin, 2026, 5, 5, 5, 5))); !d.OK() {
			t.Fatalf("override request %d refused", i+1)
		}
	}
	if d := e.Take(r, big, engineAt(at(berlin, 2026, 5, 5, 5, 5))); d.OK() || d.Limits.quotaStr != "5" {
		t.Fatalf("override 6th: %v quota %s", d.Reason, d.Limits.quotaStr)
	}
}

// A week in New York: Sunday night is the week's end, Monday 00:00 a
// fresh quota.
func TestCalendarEngineWeek(t *testing.T) {
	ny := zone(t, "America/New_York")
	r := calRule(t, "quota", "1", "period", "week", "timezone", "America/New_York")
	e := newLocalEngine(r)
	k := []byte("k")
	e.Take(r, k, engineAt(at(ny, 2026, 3, 2, 0, 0)))
	sun := at(ny, 2026, 3, 8, 23, 0)
	if d := e.Take(r, k, engineAt(sun)); d.OK() || d.RetryAfter != int64(time.Hour) {
		t.Fatalf("Sunday 23:00: %v retry %v", d.Reason, time.Duration(d.RetryAfter))
	}
	if d := e.Take(r, k, engineAt(at(ny, 2026, 3, 9, 0, 0))); !d.OK() {
		t.Fatalf("Monday 00:00: %v", d.Reason)
	}
}

// Bad calendar fields: each error names its field and says what is wanted.
func TestCalendarParseErrors(t *testing.T) {
	cases := []struct {
		fields      []string
		field, want string
	}{
		{[]string{"quota", "0", "period", "day"}, "quota", "want a whole number"},
		{[]string{"quota", "-3", "period", "day"}, "quota", "want a whole number"},
		{[]string{"quota", "3"}, "period", "required with quota"},
		{[]string{"quota", "3", "period", "fortnight"}, "period", "want minute, hour, day, week or month"},
		{[]string{"quota", "3", "period", "day", "timezone", "Mars/Olympus"}, "timezone", `unknown time zone "Mars/Olympus"`},
		{[]string{"quota", "3", "period", "day", "timezone", "Local"}, "timezone", "IANA name"},
		{[]string{"quota", "3", "period", "day", "qps", "5"}, "qps", "does not apply to a calendar quota"},
		{[]string{"quota", "3", "period", "day", "limit_type", "sliding_window"}, "quota", "applies to limit_type calendar"},
		{[]string{"limit_type", "calendar", "period", "day"}, "quota", "required with limit_type calendar"},
		{[]string{"qps", "5", "period", "day"}, "period", "calendar quotas only"},
		{[]string{"qps", "5", "timezone", "UTC"}, "timezone", "calendar quotas only"},
		{[]string{"quota", "3", "period", "day", "burst", "5"}, "burst", "token_bucket only"},
		{[]string{"quota", "3", "period", "day", "requested_tokens", "4"}, "requested_tokens", "exceeds quota 3"},
		{[]string{"quota", "3", "period", "day", "scope", "cluster", "lease_size", "2"}, "lease_size", "does not apply"},
		{[]string{"quota", "3", "period", "day", "control_behavior", "pace"}, "control_behavior", "does not apply"},
		{[]string{"quota", "3", "period", "day", "overrides", "a=0"}, "overrides", "want key=quota"},
	}
	for _, c := range cases {
		f := rulestore.Fields{}
		for i := 0; i < len(c.fields); i += 2 {
			f[c.fields[i]] = c.fields[i+1]
		}
		_, err := ParseRule("x", f)
		var fe *rulestore.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want field %s: %q", c.fields, err, c.field, c.want)
		}
	}
	r := calRule(t, "limit_type", "calendar", "quota", "3", "period", "Day")
	if r.Type != Calendar || r.Calendar.Zone != time.UTC || r.Calendar.Period != PeriodDay {
		t.Errorf("defaults: %v %v %v", r.Type, r.Calendar.Zone, r.Calendar.Period)
	}
}

// Two cluster instances on a simulated clock share 3 a day in New York in
// Redis: the 4th, a minute before midnight, waits exactly that minute; at
// midnight (the 23-hour day of 2027-03-14) both count afresh in the new
// window's key. A settled charge (count_status) lands in the window's key.
func TestCalendarClusterAcrossMidnight(t *testing.T) {
	srv := redistest.Start(t)
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	ny := zone(t, "America/New_York")
	var clock atomic.Int64
	inst := func() *limiter {
		l := newLimiter("cal", clock.Load)
		l.setBackend(b, nil)
		t.Cleanup(func() { l.Destruct() })
		return l
	}
	a, c := inst(), inst()
	r := clusterRule(t, rulestore.Fields{"quota": "3", "period": "day", "timezone": "America/New_York", "key_resolver": "global"})
	before := at(ny, 2027, 3, 13, 23, 59)
	clock.Store(engineAt(before))
	for i, l := range []*limiter{a, c, a} {
		if d := take(l, r, "global"); !d.OK() || d.Remaining != int64(2-i) {
			t.Fatalf("request %d: %v remaining %d", i+1, d.Reason, d.Remaining)
		}
	}
	d := take(c, r, "global")
	if d.OK() || d.RetryAfter != int64(time.Minute) || d.Reset != int64(time.Minute) || d.cal == nil || d.cal.secs != "86400" {
		t.Fatalf("4th: %v retry %v reset %v window %+v, want refused for 1m in a 86400 s day", d.Reason, time.Duration(d.RetryAfter), time.Duration(d.Reset), d.cal)
	}
	midnight := at(ny, 2027, 3, 14, 0, 0)
	clock.Store(engineAt(midnight))
	for i, l := range []*limiter{c, a} {
		if d := take(l, r, "global"); !d.OK() || d.Remaining != int64(2-i) || d.cal.secs != "82800" {
			t.Fatalf("after midnight %d: %v remaining %d window %+v", i+1, d.Reason, d.Remaining, d.cal)
		}
	}
	ctx := context.Background()
	key := func(day time.Time) string {
		return "t:ratelimit:cq:{" + r.ID + ":global}:" + strconv.FormatInt(day.Unix(), 10)
	}
	old, _ := b.c.Get(ctx, key(at(ny, 2027, 3, 13, 0, 0))).Result()
	cur, _ := b.c.Get(ctx, key(midnight)).Result()
	if old != "3" || cur != "2" {
		t.Fatalf("window keys hold %q and %q, want 3 and 2", old, cur)
	}
	settle(a.engine(r), r, []byte("global"), clock.Load(), 1)
	if cur, _ := b.c.Get(ctx, key(midnight)).Result(); cur != "3" {
		t.Fatalf("after a settled charge the key holds %q, want 3", cur)
	}
	if d := take(c, r, "global"); d.OK() {
		t.Fatal("admitted after the settled charge spent the quota")
	}
}

// count_status with a calendar quota: a request spends nothing when let
// in; its counted response charges the day, and the debt refuses the key
// until midnight.
func TestCalendarCountStatus(t *testing.T) {
	r := calRule(t, "quota", "2", "period", "day", "count_status", "5xx")
	e := newLocalEngine(r)
	noon := at(time.UTC, 2026, 6, 1, 12, 0)
	k := []byte("k")
	for i := 0; i < 3; i++ {
		if d := e.Take(r, k, engineAt(noon)); !d.OK() || d.Remaining != 2 {
			t.Fatalf("request %d: %v remaining %d, want allowed spending nothing", i+1, d.Reason, d.Remaining)
		}
	}
	settle(e, r, k, engineAt(noon), 3) // three 5xx responses
	if d := e.Take(r, k, engineAt(noon)); d.OK() || d.RetryAfter != int64(12*time.Hour) {
		t.Fatalf("in debt: %v retry %v, want refused for 12h", d.Reason, time.Duration(d.RetryAfter))
	}
	if d := e.Take(r, k, engineAt(noon.Add(12*time.Hour))); !d.OK() {
		t.Fatalf("next day: %v", d.Reason)
	}
}
