package ratelimit_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
)

// quota asks the admin API on adminPort for key's usage of rule; it
// returns the status, the answer and the raw body.
func quota(t *testing.T, adminPort int, method, rule, key string) (int, ratelimit.QuotaUsage, string) {
	t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("http://localhost:%d/sluice/quota/%s/%s", adminPort,
		neturl.PathEscape(rule), neturl.PathEscape(key)), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := testcaddy.Do(t, req)
	var u ratelimit.QuotaUsage
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &u); err != nil {
			t.Fatalf("quota %s/%s: %v: %s", rule, key, err, body)
		}
	}
	return resp.StatusCode, u, body
}

// mustQuota is quota that must answer 200.
func mustQuota(t *testing.T, adminPort int, rule, key string) ratelimit.QuotaUsage {
	t.Helper()
	code, u, body := quota(t, adminPort, http.MethodGet, rule, key)
	if code != http.StatusOK {
		t.Fatalf("quota %s/%s: %d %s", rule, key, code, body)
	}
	return u
}

// spend sends n requests with headers, each must pass; it returns the
// X-RateLimit-Remaining of the last.
func spend(t *testing.T, url string, n int, headers ...string) string {
	t.Helper()
	var left string
	for i := 0; i < n; i++ {
		resp, body := testcaddy.Get(t, url, headers...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d to %s: %d %s", i+1, url, resp.StatusCode, body)
		}
		left = resp.Header.Get("X-RateLimit-Remaining")
	}
	return left
}

// checkUsage compares an answer's numbers: used within 0.01 (a token
// bucket refills a little between the requests and the question),
// remaining as the last RateLimit header said.
func checkUsage(t *testing.T, u ratelimit.QuotaUsage, limit, used float64, remaining string, debt float64) {
	t.Helper()
	if u.Limit != limit || math.Abs(u.Used-used) > 0.01 || strconv.FormatInt(u.Remaining, 10) != remaining || math.Abs(u.Debt-debt) > 0.01 {
		t.Fatalf("%s %s: limit %v used %v remaining %d debt %v; want %v, %v, %s, %v", u.Rule, u.Key, u.Limit, u.Used, u.Remaining, u.Debt,
			limit, used, remaining, debt)
	}
}

const quotaLocalSites = `
	ratelimit {
		id tb
		qps 0.001
		burst 5
		key_resolver userId
		overrides "user:vip=0.001/20"
	}
	respond "ok"
|
	ratelimit {
		id sw
		limit_type sliding_window
		qps 0.001
		window_size 4000s
		key_resolver ip
	}
	respond "ok"
|
	ratelimit {
		id cal
		quota 3
		period day
		timezone %s
		key_resolver global
	}
	respond "ok"
|
	ratelimit {
		id debt
		qps 0.001
		burst 100
		key_resolver global
		response_cost {http.response.header.X-Tokens-Used}
		reserve 10
		max_cost 50
	}
	reverse_proxy %s
|
	ratelimit {
		id ten
		qps 0.001
		burst 5
		key_resolver tenant userId
	}
	respond "ok"
|
	handle /sluice/* {
		sluice_status
	}`

// GET /sluice/quota/{rule}/{key} on a real Caddy, rules of scope local:
// the numbers match the RateLimit headers the client saw, for a token
// bucket, an override key, a sliding window and a calendar day (reset at
// the zone's midnight); a response_cost settlement beyond the tokens shows
// as debt; an unknown key has its whole quota and asking makes no entry;
// an unknown rule is 404 with a suggestion; only GET is allowed.
func TestQuotaUsageLocal(t *testing.T) {
	tz, midnight := quotaZone(t)
	up := usageUpstream(t)
	s := caddyfile(t, "", strings.Split(fmt.Sprintf(quotaLocalSites, tz, up.URL), "|")...)
	testcaddy.Run(t, s.cfg)
	admin := s.adminPort

	t.Run("token bucket", func(t *testing.T) {
		left := spend(t, s.urls[0], 3, "X-User-Id: alice")
		u := mustQuota(t, admin, "tb", "user:alice")
		checkUsage(t, u, 5, 3, left, 0)
		if u.Scope != "local" || u.Type != "token_bucket" || u.Source != "memory" || u.Clock != "local" || !u.Tracked || u.Override {
			t.Fatalf("answer: %+v", u)
		}
		// 3 tokens at 0.001/s come back in 3000 s.
		if math.Abs(u.ResetSeconds-3000) > 1 || math.Abs(time.Until(u.Reset).Seconds()-3000) > 2 {
			t.Fatalf("reset %v s at %v, want about 3000 s", u.ResetSeconds, u.Reset)
		}
	})
	t.Run("override", func(t *testing.T) {
		left := spend(t, s.urls[0], 2, "X-User-Id: vip")
		u := mustQuota(t, admin, "tb", "user:vip")
		checkUsage(t, u, 20, 2, left, 0)
		if !u.Override || left != "18" {
			t.Fatalf("override key: %+v (header remaining %s)", u, left)
		}
	})
	t.Run("untouched key", func(t *testing.T) {
		before := keysOf(t, admin, "tb")
		u := mustQuota(t, admin, "tb", "user:nobody")
		checkUsage(t, u, 5, 0, "5", 0)
		if u.Tracked || u.ResetSeconds != 0 {
			t.Fatalf("untouched key: %+v", u)
		}
		if after := keysOf(t, admin, "tb"); after != before {
			t.Fatalf("asking made an entry: keys %d, then %d", before, after)
		}
	})
	t.Run("sliding window", func(t *testing.T) {
		left := spend(t, s.urls[1], 3)
		u := mustQuota(t, admin, "sw", "ip:127.0.0.1")
		checkUsage(t, u, 4, 3, left, 0)
		if u.Type != "sliding_window" || u.ResetSeconds <= 0 || u.ResetSeconds > 4000 {
			t.Fatalf("sliding window: %+v", u)
		}
	})
	t.Run("calendar", func(t *testing.T) {
		left := spend(t, s.urls[2], 2)
		u := mustQuota(t, admin, "cal", "global")
		checkUsage(t, u, 3, 2, left, 0)
		if u.Type != "calendar" || u.Period != "day" || !u.Reset.Equal(midnight) || u.WindowStart == nil ||
			math.Abs(u.ResetSeconds-time.Until(midnight).Seconds()) > 2 {
			t.Fatalf("calendar: %+v, want the reset at %v", u, midnight.UTC())
		}
	})
	t.Run("debt", func(t *testing.T) {
		spend(t, s.urls[3]+"/use?n=40", 2) // 100 → 60 → 20
		// Admitted with 20 (its reserve leaves 10), then charged 50: 30 in debt.
		if left := spend(t, s.urls[3]+"/use?n=50", 1); left != "10" {
			t.Fatalf("remaining at admission %s, want 10", left)
		}
		var u ratelimit.QuotaUsage
		testcaddy.Eventually(t, 5*time.Second, "the settlement", func() bool {
			u = mustQuota(t, admin, "debt", "global")
			return u.Debt > 29
		})
		checkUsage(t, u, 100, 130, "0", 30)
		if math.Abs(u.ResetSeconds-130_000) > 1 {
			t.Fatalf("debt: reset %v s, want 130000 (130 tokens at 0.001/s)", u.ResetSeconds)
		}
	})
	t.Run("key forms", func(t *testing.T) {
		// A tenant key holds the path: the / escaped as %2F, or as is.
		left := spend(t, s.urls[4]+"/api/orders", 2, "X-Tenant-Id: acme")
		checkUsage(t, mustQuota(t, admin, "ten", "tenant:acme:/api/orders"), 5, 2, left, 0)
		resp, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/quota/ten/tenant:acme:/api/orders", admin))
		var raw ratelimit.QuotaUsage
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &raw) != nil {
			t.Fatalf("unescaped slashes: %d %s", resp.StatusCode, body)
		}
		checkUsage(t, raw, 5, 2, left, 0)
		// A key longer than 256 bytes is named by its full text.
		long := strings.Repeat("x", 300)
		left = spend(t, s.urls[4], 1, "X-User-Id: "+long)
		u := mustQuota(t, admin, "ten", "user:"+long)
		checkUsage(t, u, 5, 1, left, 0)
		if !strings.HasPrefix(u.Key, "sha256:") {
			t.Fatalf("long key shown as %q", u.Key)
		}
	})
	t.Run("sluice_status", func(t *testing.T) {
		// The view is a read: a status site serves it too, not other methods.
		resp, body := testcaddy.Get(t, s.urls[5]+"/sluice/quota/tb/user:alice")
		var u ratelimit.QuotaUsage
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &u) != nil || u.Key != "user:alice" || u.Limit != 5 {
			t.Fatalf("through sluice_status: %d %s", resp.StatusCode, body)
		}
		req, _ := http.NewRequest(http.MethodDelete, s.urls[5]+"/sluice/quota/tb/user:alice", nil)
		if resp, body := testcaddy.Do(t, req); resp.StatusCode < 400 {
			t.Fatalf("DELETE through sluice_status: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("errors", func(t *testing.T) {
		if code, _, body := quota(t, admin, http.MethodGet, "tbb", "user:alice"); code != http.StatusNotFound ||
			!strings.Contains(body, `no rate_limit rule \"tbb\"`) || !strings.Contains(body, "did you mean tb?") {
			t.Fatalf("unknown rule: %d %s", code, body)
		}
		if code, _, body := quota(t, admin, http.MethodPost, "tb", "user:alice"); code != http.StatusMethodNotAllowed {
			t.Fatalf("POST: %d %s", code, body)
		}
		resp, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/quota/tb", admin))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "/sluice/quota/{rule}/{key}") {
			t.Fatalf("no key: %d %s", resp.StatusCode, body)
		}
	})
}

// keysOf is a rule's key count in GET /sluice/state.
func keysOf(t *testing.T, adminPort int, rule string) int64 {
	t.Helper()
	_, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/state", adminPort))
	var st struct {
		Ratelimit struct {
			Rules []ratelimit.RuleState `json:"rules"`
		} `json:"ratelimit"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Ratelimit.Rules {
		if r.Rule == rule {
			return r.Keys
		}
	}
	t.Fatalf("no rule %s in the state: %s", rule, body)
	return 0
}

const quotaClusterSites = `
	ratelimit {
		id ctb
		qps 0.001
		burst 5
		key_resolver userId
		scope cluster
		redis_timeout 500ms
	}
	respond "ok"
|
	ratelimit {
		id csw
		limit_type sliding_window
		qps 0.001
		window_size 4000s
		key_resolver userId
		scope cluster
		redis_timeout 500ms
	}
	respond "ok"
|
	ratelimit {
		id ccal
		quota 4
		period day
		timezone %s
		key_resolver userId
		scope cluster
		redis_timeout 500ms
	}
	respond "ok"`

// A cluster rule's quota is read from Redis: a second Caddy that never
// saw the key (nor any request) answers what the first one spent, as its
// RateLimit headers said. With Redis gone the answer is 503, saying so.
func TestQuotaUsageClusterFromRedis(t *testing.T) {
	rd := redistest.Start(t)
	tz, midnight := quotaZone(t)
	sites := strings.Split(fmt.Sprintf(quotaClusterSites, tz), "|")
	a := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}", sites...)
	testcaddy.Run(t, a.cfg)
	b := testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), ports(t, len(sites)), sites...))

	left := []string{spend(t, a.urls[0], 3, "X-User-Id: bob"), spend(t, a.urls[1], 2, "X-User-Id: bob"), spend(t, a.urls[2], 3, "X-User-Id: bob")}
	for i, want := range []struct {
		rule, typ   string
		limit, used float64
	}{{"ctb", "token_bucket", 5, 3}, {"csw", "sliding_window", 4, 2}, {"ccal", "calendar", 4, 3}} {
		u := mustQuota(t, b.AdminPort, want.rule, "user:bob")
		checkUsage(t, u, want.limit, want.used, left[i], 0)
		clock := "redis"
		if want.typ == "calendar" {
			clock = "local"
		}
		if u.Scope != "cluster" || u.Type != want.typ || u.Source != "redis" || u.Clock != clock || !u.Tracked {
			t.Fatalf("%s from the second instance: %+v", want.rule, u)
		}
		if want.typ == "calendar" && !u.Reset.Equal(midnight) {
			t.Fatalf("calendar reset %v, want %v", u.Reset, midnight.UTC())
		}
	}
	if u := mustQuota(t, b.AdminPort, "ctb", "user:carol"); u.Tracked || u.Remaining != 5 {
		t.Fatalf("a key Redis has not seen: %+v", u)
	}

	rd.Kill()
	for _, rule := range []string{"ctb", "ccal"} {
		code, _, body := quota(t, b.AdminPort, http.MethodGet, rule, "user:bob")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "redis") || !strings.Contains(body, rule) {
			t.Fatalf("%s with redis down: %d %s", rule, code, body)
		}
	}
}

// A cluster key's value holding numbers no engine writes (NaN, ±inf, a
// time far ahead, a count below zero) is read by the usage endpoint as
// the scripts read it (fresh state, or the counts as of now): the answer
// has a finite use and between 0 and the limit remaining, never
// -9223372036854775808.
func TestQuotaUsageClusterInvalidState(t *testing.T) {
	rd := redistest.Start(t)
	tz, _ := quotaZone(t)
	sites := strings.Split(fmt.Sprintf(quotaClusterSites, tz), "|")
	a := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}", sites...)
	testcaddy.Run(t, a.cfg)
	for _, u := range a.urls {
		spend(t, u, 1, "X-User-Id: bob")
	}
	c := rd.Client()
	keyOf := func(pattern string) string {
		keys, err := c.Keys(t.Context(), pattern).Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys %s: %v %v", pattern, keys, err)
		}
		return keys[0]
	}
	pack := func(vals ...float64) string {
		var b []byte
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return string(b)
	}
	now := float64(c.Time(t.Context()).Val().UnixMicro())
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		rule, pattern string
		limit         float64
		values        []string
	}{
		{"ctb", "*ratelimit:tb2:{ctb:user:bob}", 5, []string{pack(now, nan), pack(now, -inf), pack(nan, 1), pack(now, -1e300), pack(now+365*86400e6, 1)}},
		{"csw", "*ratelimit:sw2:{csw:user:bob}", 4, []string{pack(now-math.Mod(now, 4000e6), nan, 0), pack(now-math.Mod(now, 4000e6), inf, 0),
			pack(now-math.Mod(now, 4000e6), -1e9, 0), pack(-inf, 1, 1)}},
		{"ccal", "*ratelimit:cq:{ccal:user:bob}:*", 4, []string{"nan", "inf", "-inf", "-5", "1e300"}},
	} {
		key := keyOf(tc.pattern)
		for _, v := range tc.values {
			if err := c.Set(t.Context(), key, v, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			u := mustQuota(t, a.adminPort, tc.rule, "user:bob")
			if u.Remaining < 0 || float64(u.Remaining) > tc.limit || u.Used < 0 || u.Used > tc.limit || math.IsNaN(u.Used) || u.Debt != 0 {
				t.Errorf("%s with %q in Redis: used %v remaining %d debt %v, want used within 0–%v and remaining within 0–%v, no debt",
					tc.rule, v, u.Used, u.Remaining, u.Debt, tc.limit, tc.limit)
			}
		}
	}
}
