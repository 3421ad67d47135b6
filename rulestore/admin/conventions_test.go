package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// The admin API follows Caddy's /config conventions: a malformed If-Match
// is a 400, a 405 says what is allowed, a dry run shows the rule typed (no
// Go internals), the history of a rule that never existed is a 404, a PUT
// that changes nothing writes nothing, and error texts cut long values.
func TestAdminAPIConventions(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, staticStore(r.URL()))
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })

	if code, body, _ := adminReq(t, in, "PUT", "/sluice/rules/rate_limit/s", `{"qps": 2}`, "If-Match: abc"); code != 400 || !strings.Contains(body, "malformed If-Match") {
		t.Fatalf("unquoted If-Match: %d %s", code, body)
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"POST", "/sluice/rules/rate_limit/s", "GET, PUT, PATCH, DELETE"},
		{"PUT", "/sluice/rules/rate_limit", "GET"},
		{"PUT", "/sluice/state", "GET"},
		{"GET", "/sluice/rules/rate_limit/s/rollback", "POST"},
		{"POST", "/sluice/rules/rate_limit/s/history", "GET"},
	} {
		if code, body, h := adminReq(t, in, tc.method, tc.path, ""); code != 405 || h.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q (%s)", tc.method, tc.path, code, h.Get("Allow"), tc.allow, body)
		}
	}
	if code, body, _ := adminReq(t, in, "PATCH", "/sluice/rules/rate_limit/s?dry_run=true", `{"qps": 7}`); code != 200 ||
		strings.Contains(body, `"Source"`) || strings.Contains(body, `"Value"`) || !strings.Contains(body, `"value":{"qps":7,"burst":9}`) {
		t.Fatalf("dry run: %d %s", code, body)
	}
	if code, body, _ := adminReq(t, in, "GET", "/sluice/rules/rate_limit/nope/history", ""); code != 404 {
		t.Fatalf("history of a rule that never existed: %d %s", code, body)
	}

	// A PUT that changes nothing: no change-log entry, no history entry.
	if code, body, _ := adminReq(t, in, "PUT", "/sluice/rules/rate_limit/s", `{"qps": 1}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	logLen, histLen := c.XLen(t.Context(), "gateway:rules").Val(), c.LLen(t.Context(), "gateway:history:rate_limit:s").Val()
	if code, body, h := adminReq(t, in, "PUT", "/sluice/rules/rate_limit/s", `{"qps": 1}`); code != 200 || h.Get("ETag") != rulestore.ETag(rulestore.Version(rulestore.Fields{"qps": "1"})) {
		t.Fatalf("PUT of the same fields: %d %s", code, body)
	}
	if l, hl := c.XLen(t.Context(), "gateway:rules").Val(), c.LLen(t.Context(), "gateway:history:rate_limit:s").Val(); l != logLen || hl != histLen {
		t.Fatalf("a PUT that changes nothing: change log %d -> %d entries, history %d -> %d", logLen, l, histLen, hl)
	}

	// Long values are cut in error answers.
	long := strings.Repeat("A", 40<<10)
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "/sluice/rules/rate_limit/s", `{"qps": {"x": "` + long + `"}}`},
		{"PUT", "/sluice/rules/rate_limit/s", `{"` + long + `": 1}`},
		{"PUT", "/sluice/rules/rate_limit/s", `{"qps": "` + long + `"}`},
		{"GET", "/sluice/rules/" + long, ""},
		{"GET", "/sluice/" + long + "/x/y", ""},
	} {
		code, body, _ := adminReq(t, in, tc.method, tc.path, tc.body)
		if code < 400 || len(body) > 2*maxErrorText {
			t.Errorf("%s %.40s… with a 40 KB value: %d, %d bytes of answer", tc.method, tc.path, code, len(body))
		}
	}
	if code, _, _ := adminReq(t, in, http.MethodGet, "/sluice/rules/rate_limit/s", ""); code != 200 {
		t.Fatalf("GET after the bad writes: %d", code)
	}
}

// Ids . and .. cannot be named in a URL: refused everywhere, and a hash
// written with such an id in Redis is ignored.
func TestDotIDsRefused(t *testing.T) {
	for _, id := range []string{".", ".."} {
		if err := rulestore.ValidID(id); err == nil {
			t.Errorf("ValidID(%q) accepted", id)
		}
	}
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, redisStore(r.URL()))
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })
	push(t, c, "..", "qps", "5")
	push(t, c, ".", "qps", "5")
	push(t, c, "ok", "qps", "5")
	in.waitQPS("ok", "5")
	if code, body, _ := adminReq(t, in, "GET", "/sluice/rules/rate_limit", ""); code != 200 || strings.Contains(body, `"id":"."`) || strings.Contains(body, `"id":".."`) {
		t.Fatalf("rules: %d %s", code, body)
	}
}
