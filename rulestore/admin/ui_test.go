package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// uiGet sends a GET to the admin listener with optional headers.
func (in *instance) uiGet(path string, headers ...string) (*http.Response, string) {
	in.T.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://localhost:%d%s", in.Admin, path), nil)
	if err != nil {
		in.T.Fatal(err)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		if strings.EqualFold(name, "Host") {
			req.Host = strings.TrimSpace(value) // net/http sends req.Host, not a Host header
			continue
		}
		req.Header.Set(name, strings.TrimSpace(value))
	}
	return testcaddy.Do(in.T, req)
}

func TestStatusPageServesEmbeddedFiles(t *testing.T) {
	in := runStore(t, map[string]any{})
	for _, c := range []struct{ path, ctype, contains string }{
		{"/sluice/ui/", "text/html; charset=utf-8", `<script type="module" src="app.js"`},
		{"/sluice/ui/index.html", "text/html; charset=utf-8", "<title>Sluice status</title>"},
		{"/sluice/ui/app.js", "text/javascript; charset=utf-8", "/sluice/state"},
		{"/sluice/ui/style.css", "text/css; charset=utf-8", ".badge.open"},
	} {
		resp, body := in.uiGet(c.path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != c.ctype || !strings.Contains(body, c.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", c.path, resp.StatusCode, resp.Header.Get("Content-Type"),
				c.contains, strings.Contains(body, c.contains))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") ||
			!strings.Contains(csp, "connect-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, csp)
		}
		if rp := resp.Header.Get("Referrer-Policy"); rp != "same-origin" {
			t.Errorf("GET %s: Referrer-Policy %q, want same-origin (Caddy's origin check reads the Referer of GETs)", c.path, rp)
		}
	}
	for _, path := range []string{"/sluice/ui/nope.js", "/sluice/ui/../admin.go", "/sluice/ui/ui/app.js"} {
		if resp, body := in.uiGet(path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://localhost:%d/sluice/ui/", in.Admin), nil)
	if resp, body := testcaddy.Do(t, req); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /sluice/ui/: %d %s, want 405", resp.StatusCode, body)
	}
	// The rest of /sluice/ is still the admin API.
	if resp, body := in.uiGet("/sluice/store"); resp.StatusCode != 200 || !strings.Contains(body, `"rules"`) {
		t.Errorf("GET /sluice/store: %d %s", resp.StatusCode, body)
	}
}

// The page is exactly as exposed as the admin API: Caddy's Host and Origin
// checks run before it, as before every admin route.
func TestStatusPageHasTheAdminAPIsExposure(t *testing.T) {
	in := runStore(t, map[string]any{})
	self := fmt.Sprintf("http://localhost:%d", in.Admin)
	for _, c := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"plain client", nil, 200},
		{"same-origin fetch (Referer)", []string{"Sec-Fetch-Mode: cors", "Referer: " + self + "/sluice/ui/"}, 200},
		{"same-origin Origin", []string{"Origin: " + self}, 200},
		{"other origin", []string{"Origin: http://evil.example"}, 403},
		{"other origin's Referer", []string{"Sec-Fetch-Mode: cors", "Referer: http://evil.example/x"}, 403},
		{"foreign Host (DNS rebinding)", []string{"Host: evil.example"}, 403},
	} {
		for _, path := range []string{"/sluice/ui/", "/sluice/ui/overview.json"} {
			resp, body := in.uiGet(path, c.headers...)
			if resp.StatusCode != c.want {
				t.Errorf("%s: GET %s = %d %s, want %d", c.name, path, resp.StatusCode, body, c.want)
			}
		}
	}
}

func TestStatusPageOverviewJSON(t *testing.T) {
	r := redistest.Start(t)
	in := runStore(t, redisStore(r.URL()))
	testcaddy.Eventually(t, 10*time.Second, "store connected", func() bool { return in.status().Connected })
	before := readOverview(t, in)
	// A write through the admin API is applied here and its delay observed.
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://localhost:%d/sluice/rules/rate_limit/ui_api", in.Admin),
		strings.NewReader(`{"qps": 5, "key_resolver": "global"}`))
	if resp, body := testcaddy.Do(t, req); resp.StatusCode != 200 {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	in.waitQPS("ui_api", "5")
	var after rulestore.Overview
	testcaddy.Eventually(t, 10*time.Second, "propagation delay observed", func() bool {
		after = readOverview(t, in)
		return after.Propagation.Count > before.Propagation.Count
	})
	if after.LiveInstances < 1 || after.Propagation.SumSeconds < before.Propagation.SumSeconds {
		t.Fatalf("overview %+v after %+v", after, before)
	}
	// The shape the page reads, and nothing else (no keys of any kind).
	_, body := in.uiGet("/sluice/ui/overview.json")
	var raw map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	prop, _ := raw["propagation"].(map[string]any)
	skipped, isList := raw["skipped"].([]any)
	if len(raw) != 3 || raw["live_instances"] == nil || prop == nil || prop["count"] == nil || prop["sum_seconds"] == nil || !isList || len(skipped) != 0 {
		t.Fatalf("overview.json = %s", body)
	}
}

func readOverview(t *testing.T, in *instance) rulestore.Overview {
	t.Helper()
	resp, body := in.uiGet("/sluice/ui/overview.json")
	var o rulestore.Overview
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &o) != nil {
		t.Fatalf("GET overview.json: %d %s", resp.StatusCode, body)
	}
	return o
}

// A browser's typed or bookmarked navigation to a loopback admin address
// carries Sec-Fetch-Mode but neither Origin nor Referer, and Caddy refuses
// it unless the admin origins list "" (docs/status-page.md). The page's own
// requests then pass as before, and other origins and hosts are still
// refused.
func TestStatusPageNavigationNeedsTheEmptyOrigin(t *testing.T) {
	navigate := []string{"Sec-Fetch-Mode: navigate", "Sec-Fetch-Site: none", "Sec-Fetch-Dest: document"}
	in := runStore(t, map[string]any{})
	if resp, body := in.uiGet("/sluice/ui/", navigate...); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("typed navigation with Caddy's default origins: %d %s, want 403", resp.StatusCode, body)
	}

	self := fmt.Sprintf("localhost:%d", in.Admin)
	var cfg map[string]any
	json.Unmarshal(in.JSON(map[string]any{}), &cfg)
	cfg["admin"].(map[string]any)["origins"] = []string{self, fmt.Sprintf("127.0.0.1:%d", in.Admin), ""}
	b, _ := json.Marshal(cfg)
	// ReloadJSON waits until the old admin endpoint, on the same port, has
	// closed (a request sent at once got EOF from it on a busy box).
	testcaddy.ReloadJSON(t, b)
	testcaddy.Eventually(t, 10*time.Second, "admin endpoint with the new origins", func() bool {
		resp, _ := in.uiGet("/sluice/ui/", navigate...)
		return resp.StatusCode == 200
	})
	for _, c := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"page's GET (Referer)", []string{"Sec-Fetch-Mode: cors", "Referer: http://" + self + "/sluice/ui/"}, 200},
		{"page's POST (Origin)", []string{"Sec-Fetch-Mode: cors", "Origin: http://" + self}, 200},
		{"other origin", []string{"Sec-Fetch-Mode: cors", "Origin: http://evil.example"}, 403},
		{"other origin's Referer", []string{"Sec-Fetch-Mode: cors", "Referer: http://evil.example/"}, 403},
		{"no-cors request from any page", []string{"Sec-Fetch-Mode: no-cors"}, 400},
		{"foreign Host (DNS rebinding)", append([]string{"Host: evil.example"}, navigate...), 403},
	} {
		if resp, body := in.uiGet("/sluice/ui/overview.json", c.headers...); resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.want)
		}
	}
}
