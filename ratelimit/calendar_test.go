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
	"github.com/sluicegw/sluice/ratelimit/engine"
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

func engineAt(t time.Time) int64 { return engine.At(t) }

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
		if d.Cal == nil || d.Cal.Secs != day.length {
			t.Fatalf("%v: window %+v, want %s s", noon, d.Cal, day.length)
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
	if d := e.Take(r, big, engineAt(at(berlin, 2026, 5, 5, 5, 5))); d.OK() || d.Limits.QuotaStr != "5" {
		t.Fatalf("override 6th: %v quota %s", d.Reason, d.Limits.QuotaStr)
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
	if r.Type != Calendar || r.Calendar.Zone != time.UTC || r.Calendar.Period != engine.PeriodDay {
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
	if d.OK() || d.RetryAfter != int64(time.Minute) || d.Reset != int64(time.Minute) || d.Cal == nil || d.Cal.Secs != "86400" {
		t.Fatalf("4th: %v retry %v reset %v window %+v, want refused for 1m in a 86400 s day", d.Reason, time.Duration(d.RetryAfter), time.Duration(d.Reset), d.Cal)
	}
	midnight := at(ny, 2027, 3, 14, 0, 0)
	clock.Store(engineAt(midnight))
	for i, l := range []*limiter{c, a} {
		if d := take(l, r, "global"); !d.OK() || d.Remaining != int64(2-i) || d.Cal.Secs != "82800" {
			t.Fatalf("after midnight %d: %v remaining %d window %+v", i+1, d.Reason, d.Remaining, d.Cal)
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
