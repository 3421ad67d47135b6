package engine

import (
	"testing"
	"time"
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
				if !ns.Equal(e) || !ne.After(ns) || ne.Sub(ns) > p.Longest() {
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
