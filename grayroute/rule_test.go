package grayroute

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

func mustRule(t testing.TB, id string, f rulestore.Fields) *Rule {
	t.Helper()
	g, err := ParseRule(id, f)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestParseRuleErrorsNameTheField(t *testing.T) {
	for _, c := range []struct {
		f     rulestore.Fields
		field string
	}{
		{rulestore.Fields{"target_version": "v2", "colour": "red"}, "colour"},
		{rulestore.Fields{"match_tag": "X-Beta"}, "target_version"},
		{rulestore.Fields{"target_version": "v2 beta"}, "target_version"},
		{rulestore.Fields{"target_version": "v2", "fallback_version": "v1/x"}, "fallback_version"},
		{rulestore.Fields{"target_version": "v2", "weight": "120"}, "weight"},
		{rulestore.Fields{"target_version": "v2", "match_tag": "X-Beta", "match_source": "body"}, "match_source"},
		{rulestore.Fields{"target_version": "v2", "match_tag": "X-Beta", "match_value": "regex:(("}, "match_value"},
		{rulestore.Fields{"target_version": "v2", "match_value": "yes"}, "match_value"},
		{rulestore.Fields{"target_version": "v2", "hash_key": "cookie"}, "hash_key"},
		{rulestore.Fields{"target_version": "v2", "ramp": "soon"}, "ramp"},
		{rulestore.Fields{"target_version": "v2", "fallback_on_open": "a b"}, "fallback_on_open"},
		// CR/LF (any control character) in a header name, as every other
		// header-name field refuses it.
		{rulestore.Fields{"target_version": "v2", "match_tag": "X-Beta\r\nX-Injected"}, "match_tag"},
		{rulestore.Fields{"target_version": "v2", "match_tag": "X-\x00Beta"}, "match_tag"},
	} {
		_, err := rulestore.Parse(rulestore.Gray, "r", c.f)
		var fe *rulestore.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%v: got %v, want a FieldError on %s", c.f, err, c.field)
		}
	}
}

func TestParseRuleDefaults(t *testing.T) {
	g := mustRule(t, "r", rulestore.Fields{"target_version": "v2"})
	if g.Weight != Buckets || g.Tag != "" || g.Source != SourceAny || g.HashKey.String() != DefaultHashKey || g.Fallback != "" {
		t.Errorf("defaults: %+v", g)
	}
	if !g.Matches(httptest.NewRequest("GET", "/", nil)) {
		t.Error("a rule without match_tag must match every request")
	}
}

func TestMatchSources(t *testing.T) {
	req := func(header, query, cookie string) *http.Request {
		r := httptest.NewRequest("GET", "/?"+query, nil)
		if header != "" {
			r.Header.Set("X-Beta", header)
		}
		if cookie != "" {
			r.Header.Set("Cookie", "session=abc; X-Beta="+cookie+"; other=1")
		}
		return r
	}
	any := mustRule(t, "r", rulestore.Fields{"target_version": "v2", "match_tag": "X-Beta", "match_value": "yes"})
	hdr := mustRule(t, "r", rulestore.Fields{"target_version": "v2", "match_tag": "x-beta", "match_value": "yes", "match_source": "header"})
	qry := mustRule(t, "r", rulestore.Fields{"target_version": "v2", "match_tag": "X-Beta", "match_value": "yes", "match_source": "query"})
	ck := mustRule(t, "r", rulestore.Fields{"target_version": "v2", "match_tag": "X-Beta", "match_value": "yes", "match_source": "cookie"})
	for _, c := range []struct {
		r                 *http.Request
		any, hdr, qry, ck bool
	}{
		{req("yes", "", ""), true, true, false, false},
		{req("", "X-Beta=yes", ""), true, false, true, false},
		{req("", "a=1&X-Beta=y%65s", ""), true, false, true, false},
		{req("", "", "yes"), true, false, false, true},
		{req("", "", `"yes"`), true, false, false, true},
		{req("no", "X-Beta=yes", "yes"), false, false, true, true}, // any: the header is found first
		{req("", "", ""), false, false, false, false},
	} {
		if got := [4]bool{any.Matches(c.r), hdr.Matches(c.r), qry.Matches(c.r), ck.Matches(c.r)}; got != [4]bool{c.any, c.hdr, c.qry, c.ck} {
			t.Errorf("%s %v cookie=%q: any/header/query/cookie = %v", c.r.URL, c.r.Header["X-Beta"], c.r.Header.Get("Cookie"), got)
		}
	}
}

func TestValueMatchers(t *testing.T) {
	for _, c := range []struct {
		spec string
		yes  []string
		no   []string
	}{
		{"beta", []string{"beta"}, []string{"Beta", "beta2", "alpha"}},
		{"*", []string{"x", "beta"}, nil},
		{"a, b,c", []string{"a", "b", "c"}, []string{"a,b", "d"}},
		{"prefix:beta-", []string{"beta-1", "beta-"}, []string{"beta", "xbeta-1"}},
		{`regex:^v\d+$`, []string{"v1", "v22"}, []string{"v", "xv1", "v1x"}},
		{"exact:a,b", []string{"a,b"}, []string{"a", "b"}},
	} {
		m, err := ParseValueMatcher(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range c.yes {
			if !m.Match(v) {
				t.Errorf("%q should match %q", c.spec, v)
			}
		}
		for _, v := range c.no {
			if m.Match(v) {
				t.Errorf("%q should not match %q", c.spec, v)
			}
		}
	}
}

func TestCanaryWithRampAndFakeClock(t *testing.T) {
	g := mustRule(t, "ramped", rulestore.Fields{"target_version": "v2", "hash_key": "{http.request.header.X-User-Id}",
		"ramp": "2026-12-01T10:00:00Z 10m 10,50,100"})
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	share := func(at time.Duration) float64 {
		now := func() time.Time { return start.Add(at) }
		in := 0
		for i := 0; i < 2000; i++ {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("X-User-Id", fmt.Sprint(i))
			if c, random := g.Canary(r, now); random {
				t.Fatal("random choice with a key present")
			} else if c {
				in++
			}
		}
		return float64(in) * 100 / 2000
	}
	for _, c := range []struct {
		at       time.Duration
		min, max float64
	}{{-time.Minute, 0, 0}, {time.Minute, 7, 13}, {15 * time.Minute, 46, 54}, {time.Hour, 100, 100}} {
		if s := share(c.at); s < c.min || s > c.max {
			t.Errorf("at start%+v: %.1f%% canary, want %.0f..%.0f", c.at, s, c.min, c.max)
		}
	}
	// weight caps the ramp: weight 0 stops the canary whatever the schedule.
	g2 := mustRule(t, "ramped", rulestore.Fields{"target_version": "v2", "weight": "0", "ramp": "2026-12-01T10:00:00Z 10m 10,50,100"})
	if th := g2.Threshold(func() time.Time { return start.Add(time.Hour) }); th != 0 {
		t.Errorf("weight 0 with a ramp at 100%%: threshold %d, want 0", th)
	}
}

func TestCanaryRandomOnlyWithoutKey(t *testing.T) {
	g := mustRule(t, "r", rulestore.Fields{"target_version": "v2", "weight": "50", "hash_key": "{http.request.header.X-User-Id}"})
	r := httptest.NewRequest("GET", "/", nil)
	if _, random := g.Canary(r, time.Now); !random {
		t.Error("no key: want a random choice")
	}
	r.Header.Set("X-User-Id", "u1")
	first, random := g.Canary(r, time.Now)
	if random {
		t.Error("key present: want no random choice")
	}
	for i := 0; i < 100; i++ {
		if c, _ := g.Canary(r, time.Now); c != first {
			t.Fatal("the same user got a different answer")
		}
	}
}

func BenchmarkRuleDecision(b *testing.B) {
	g := mustRule(b, "checkout", rulestore.Fields{"target_version": "v2", "weight": "20", "match_tag": "X-Beta", "match_value": "yes,on"})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Beta", "on")
	r.Header.Set("X-User-Id", "user-123456")
	b.ReportAllocs()
	for b.Loop() {
		if g.Matches(r) {
			g.Canary(r, time.Now)
		}
	}
}
