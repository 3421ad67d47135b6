package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// quotaZone picks a zone whose next midnight is at least 10 minutes away,
// so no day ends during the test; it returns the zone and that midnight.
func quotaZone(t *testing.T) (string, time.Time) {
	t.Helper()
	for _, name := range []string{"America/New_York", "Asia/Tokyo", "Europe/Berlin"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().In(loc)
		y, m, d := now.Date()
		midnight := time.Date(y, m, d+1, 0, 0, 0, 0, loc)
		if midnight.Sub(now) > 10*time.Minute {
			return name, midnight
		}
	}
	t.Fatal("no zone with midnight 10 minutes away") // the three are hours apart
	return "", time.Time{}
}

// A quota of 3 a day in a zone, in a real Caddy counting in this process,
// in Redis (scope cluster) and by a rule from a Redis hash: 3 pass with
// the count going down, the 4th is refused with Retry-After and the
// RateLimit t the seconds to midnight in the zone, and RateLimit-Policy
// names the quota and the day's length. The cluster count is Redis's: a
// unit spent there by another instance counts, and today's key holds 3
// until midnight plus the margin.
func TestCalendarQuotaInCaddy(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	tz, midnight := quotaZone(t)
	redistest.Push(t, c, "rate_limit:rule:daily", "gateway:rules:rate_limit", "daily",
		"quota", "3", "period", "day", "timezone", tz, "key_resolver", "global")
	site := func(id, scope string) string {
		return fmt.Sprintf("\tratelimit {\n\t\tid %s\n\t\tquota 3\n\t\tperiod day\n\t\ttimezone %s\n\t\tkey_resolver global\n\t\tscope %s\n\t}\n\trespond \"ok\"", id, tz, scope)
	}
	s := caddyfile(t, fmt.Sprintf("\trulestore {\n\t\tredis %s\n\t}", rd.URL()),
		site("cal-local", "local"), site("cal-cluster", clusterScope), "\tratelimit daily\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	testcaddy.Eventually(t, 10*time.Second, "rule daily loaded from redis", func() bool { return limitHeader(t, s.urls[2]) == "3" })
	// That probe spent one of daily's 3; and another instance spent one of
	// cal-cluster's in Redis, in today's window key.
	loc, _ := time.LoadLocation(tz)
	y, m, d := time.Now().In(loc).Date()
	start := time.Date(y, m, d, 0, 0, 0, 0, loc)
	dayLen := int64(midnight.Sub(start) / time.Second)
	ctx := context.Background()
	if err := c.Set(ctx, "ratelimit:cq:{cal-cluster:global}:"+strconv.FormatInt(start.Unix(), 10), "1", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"cal-local", "cal-cluster", "daily"} {
		url := s.urls[i]
		first := 0
		if id != "cal-local" {
			first = 1
		}
		for n := first; n < 3; n++ {
			resp, _ := testcaddy.Get(t, url)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(2-n) {
				t.Fatalf("%s request %d: %d remaining %q", id, n+1, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
			}
		}
		before := time.Now()
		resp, _ := testcaddy.Get(t, url)
		after := time.Now()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s 4th: %d, want 429", id, resp.StatusCode)
		}
		// Retry-After is the wait rounded up to whole seconds.
		lo, hi := int64(midnight.Sub(after)/time.Second), int64(midnight.Sub(before)/time.Second)+1
		retry, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
		if retry < lo || retry > hi {
			t.Errorf("%s: Retry-After %d, want %d..%d (to midnight in %s)", id, retry, lo, hi, tz)
		}
		wantRL := fmt.Sprintf(`"%s";r=0;t=%d`, id, retry)
		if got := resp.Header.Get("RateLimit"); got != wantRL {
			t.Errorf("%s: RateLimit %q, want %q", id, got, wantRL)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), fmt.Sprintf(`"%s";q=3;w=%d`, id, dayLen); got != want {
			t.Errorf("%s: RateLimit-Policy %q, want %q", id, got, want)
		}
	}
	keys, err := c.Keys(ctx, "*ratelimit:cq:{cal-cluster:global}:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("cluster keys %v %v, want one", keys, err)
	}
	if !strings.HasSuffix(keys[0], ":"+strconv.FormatInt(start.Unix(), 10)) {
		t.Errorf("key %s, want the day's start %d in it", keys[0], start.Unix())
	}
	if v, _ := c.Get(ctx, keys[0]).Result(); v != "3" {
		t.Errorf("key %s holds %q, want 3", keys[0], v)
	}
	ttl, _ := c.PTTL(ctx, keys[0]).Result()
	if want := time.Until(midnight) + 10*time.Minute; ttl < want-5*time.Second || ttl > want+time.Second {
		t.Errorf("key TTL %v, want about %v (midnight + 10m)", ttl, want)
	}
}

// Bad calendar fields: caddy validate names the file, line and field.
func TestCalendarValidateErrors(t *testing.T) {
	cases := []struct {
		body string
		line int
		want string
	}{
		{"ratelimit {\n\t\tquota 3\n\t\tperiod day\n\t\ttimezone Europe/Berlni\n\t}", 11, `field timezone="Europe/Berlni": unknown time zone "Europe/Berlni"`},
		{"ratelimit {\n\t\tquota 3\n\t\tperiod fortnight\n\t}", 10, `field period="fortnight": want minute, hour, day, week or month`},
		{"ratelimit {\n\t\tquota 0\n\t\tperiod day\n\t}", 9, `field quota="0": want a whole number`},
		{"ratelimit {\n\t\tquota 3\n\t\tperiod day\n\t\tqps 5\n\t}", 11, `field qps="5": does not apply to a calendar quota`},
	}
	for _, c := range cases {
		s := caddyfile(t, "", "\t"+c.body+"\n\trespond \"ok\"")
		err := testcaddy.Validate(s.cfg)
		if err == nil || !strings.Contains(err.Error(), "Caddyfile:"+strconv.Itoa(c.line)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want Caddyfile:%d and %q", c.body, err, c.line, c.want)
		}
	}
}
