package uitest

// The status page as an on-call engineer uses it: stable under live
// updates, honest about what is broken, usable on a phone and with a
// keyboard, and served by the sluice_status handler on an ordinary site.
//
// SLUICE_SCREENSHOT_DIR=<dir> also saves status-desktop.png and
// status-phone.png there (make screenshot).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

const (
	failingKeys = 25 // keys of f_keyed whose calls fail: open
	healthyKeys = 5  // keys whose calls succeed: closed
)

func findingsCaddyfile(admin, site, ro, auth int, redisURL, upstream, storage, hash string) string {
	return fmt.Sprintf(`{
	admin localhost:%[1]d {
		origins localhost:%[1]d 127.0.0.1:%[1]d [::1]:%[1]d ""
	}
	persist_config off
	storage file_system %[6]s
	rulestore {
		redis %[5]s
		resync 1s
		rate_limit f_limit {
			qps 100
			key_resolver global
		}
		circuit_breaker f_keyed {
			failure_threshold 1
			open_duration 1h
			raw_keys true
			key {http.request.header.X-Key}
		}
		circuit_breaker f_short {
			failure_threshold 1
			open_duration 1s
			raw_keys true
			key {http.request.header.X-Key}
		}
		gray f_canary {
			match_tag X-Canary
			match_value yes
			target_version v2
			fallback_version v1
			weight 100
		}
		gray f_idle {
			target_version v3
			weight 5
		}
	}
}
http://127.0.0.1:%[2]d {
	route /limited {
		ratelimit f_limit
		respond "ok"
	}
	route /keyed {
		circuitbreaker f_keyed
		reverse_proxy %[7]s
	}
	route /short {
		circuitbreaker f_short
		reverse_proxy %[7]s
	}
	route /gray {
		grayroute f_canary
		respond "ok"
	}
}
http://127.0.0.1:%[3]d {
	handle_path /ops/* {
		sluice_status
	}
}
http://127.0.0.1:%[4]d {
	route /sluice/* {
		basic_auth {
			ops %[8]s
		}
		sluice_status allow_writes
	}
}
`, admin, site, ro, auth, redisURL, storage, upstream, hash)
}

func TestStatusPageFindings(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Chromium, Caddy and Redis; skipped under -short")
	}
	r := redistest.Start(t)
	rc := r.Client()
	// The upstream fails the calls that ask it to.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("X-Fail") != "" {
			http.Error(w, "failing", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer upstream.Close()
	// The cheapest bcrypt cost: Caddy's default takes seconds on a busy box.
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	admin, site, ro, auth := testcaddy.FreePort(t), testcaddy.FreePort(t), testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, findingsCaddyfile(admin, site, ro, auth, r.URL(), upstream.URL, t.TempDir(), string(hash)))
	adminURL := fmt.Sprintf("http://localhost:%d", admin)
	siteURL := fmt.Sprintf("http://127.0.0.1:%d", site)
	roURL := fmt.Sprintf("http://127.0.0.1:%d", ro)
	authURL := fmt.Sprintf("http://127.0.0.1:%d", auth)

	get := func(path string, headers ...string) int {
		t.Helper()
		resp, _ := testcaddy.Get(t, siteURL+path, headers...)
		return resp.StatusCode
	}
	// f_keyed: 25 keys open (their one call failed), 5 closed.
	for k := 0; k < failingKeys+healthyKeys; k++ {
		h := []string{fmt.Sprintf("X-Key: k%02d", k)}
		if k < failingKeys {
			h = append(h, "X-Fail: 1")
		}
		get("/keyed", h...)
	}
	// f_short: one key open for 1 s, then due a probe.
	get("/short", "X-Key: s0", "X-Fail: 1")
	// f_canary takes the requests with X-Canary: yes; 30 of 40 match no rule.
	for i := 0; i < 40; i++ {
		if i < 10 {
			get("/gray", "X-Canary: yes")
		} else {
			get("/gray")
		}
	}
	get("/limited")
	// A rule held in Redis alone (marked stale while Redis is down).
	redistest.Push(t, rc, "rate_limit:rule:f_redis", "gateway:rules:rate_limit", "f_redis", "qps", "5", "key_resolver", "global")
	// A change through the admin API: the fleet's change feed lists it.
	req, _ := http.NewRequest(http.MethodPut, adminURL+"/sluice/rules/rate_limit/f_limit", strings.NewReader(`{"qps": "7", "key_resolver": "global"}`))
	if resp, body := testcaddy.Do(t, req); resp.StatusCode != 200 {
		t.Fatalf("PUT f_limit: %d %s", resp.StatusCode, body)
	}

	p, consoleErrors := browser(t, 1280, 700)

	// 10. A malformed fragment does not stop the page.
	p.open(adminURL + "/sluice/ui/#%E0%A4%A")
	if !p.has("#overview.tab.active") {
		t.Errorf("%s: the overview is not shown", "#%E0%A4%A")
	}

	// 12. Tabs, labels and a live region for assistive technology.
	if got := eval[string](p, `[...document.querySelectorAll("#tabs a")].map(a => a.getAttribute("role") + "=" + a.getAttribute("aria-selected")).join(" ")`); got != "tab=true tab=false tab=false tab=false tab=false" {
		t.Errorf("tabs for assistive technology: %s", got)
	}
	for _, id := range []string{"rule-filter", "gray-filter", "cb-keys-q", "problems-only"} {
		if n := eval[int](p, fmt.Sprintf(`document.getElementById(%q).labels.length`, id)); n != 1 {
			t.Errorf("#%s has %d labels, want 1", id, n)
		}
	}
	if !p.has(`#live[aria-live="polite"]`) || !p.has(`#error[role="alert"]`) {
		t.Error("no live region for updates and errors")
	}

	// 5. The change feed: who, what and the diff.
	change := `#changes tr[data-change="rate_limit/f_limit"]`
	p.waitFor(20*time.Second, "change feed lists the PUT", fmt.Sprintf(`!!document.querySelector(%q)`, change))
	if got := p.text(change); !strings.Contains(got, "admin_api") || !strings.Contains(got, "qps") || !strings.Contains(got, "→ 7") {
		t.Errorf("change feed row %q, want admin_api and qps → 7", got)
	}

	// 2. Keyed breakers: counts in the row and the summary, worst first,
	// every key reachable.
	p.show("breakers")
	keyedRow := `#cb-table tr[data-breaker="f_keyed"]`
	p.waitFor(20*time.Second, "f_keyed open key count", fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent.includes("%d of %d keys open")`, keyedRow, failingKeys, failingKeys+healthyKeys))
	if !p.has(keyedRow + " td.state .badge.open") {
		t.Errorf("f_keyed row state %q, want open (%d of its keys are)", p.text(keyedRow+" td.state"), failingKeys)
	}
	// 11. The key whose open time ran out is not shown open.
	p.waitFor(20*time.Second, "f_short key due a probe", `(() => { const r = document.querySelector('#cb-table tr[data-breaker-key="f_short|s0"]'); return !!r && r.querySelector(".badge").textContent === "half_open" && r.textContent.includes("next call probes"); })()`)
	// The summary counts f_keyed's open keys alone once f_short's ran out
	// (a quick machine reaches here within that key's 1 s open time).
	if got := p.text(`#cb-summary [data-summary="open"]`); got != fmt.Sprintf("%d keys open", failingKeys) {
		t.Errorf("breakers summary %q, want %d keys open", got, failingKeys)
	}
	// All 30 keys in the key browser, the open ones first.
	p.click(keyedRow + ` button[data-action="keys"]`)
	p.waitFor(10*time.Second, "key browser lists every key", fmt.Sprintf(`document.querySelectorAll("#cb-keys-table tr[data-key]").length === %d`, failingKeys+healthyKeys))
	states := eval[[]string](p, `[...document.querySelectorAll("#cb-keys-table tr[data-key] .badge")].map(b => b.textContent)`)
	for i, s := range states {
		if want := map[bool]string{true: "open", false: "closed"}[i < failingKeys]; s != want {
			t.Fatalf("key browser row %d is %s, want %s (worst first): %v", i, s, want, states)
		}
	}
	if err := chromedp.Do(p.ctx, chromedp.SendKeys(chromedp.CSS("#cb-keys-q"), "k27")); err != nil {
		t.Fatal(err)
	}
	p.waitFor(10*time.Second, "key search", `document.querySelectorAll("#cb-keys-table tr[data-key]").length === 1 && !!document.querySelector('#cb-keys-table tr[data-key="k27"] .badge.closed')`)

	// 5. Transitions kept by the server: a fresh page lists them, and the
	// row's link shows the rule's alone.
	p.open(adminURL + "/sluice/ui/?fresh#breakers") // a new page load, not a fragment change
	p.waitFor(10*time.Second, "transitions of the last hour", fmt.Sprintf(`document.querySelectorAll('#cb-transitions tr[data-transition="f_keyed"]').length >= %d`, failingKeys))
	p.click(keyedRow + ` a[data-action="transitions"]`)
	p.waitFor(10*time.Second, "f_keyed transitions alone", `document.getElementById("cb-transitions-title").textContent.includes("f_keyed") &&
		[...document.querySelectorAll("#cb-transitions tbody tr")].every(r => r.dataset.transition === "f_keyed")`)

	// 1. Focus, selection and scroll kept across 5 polls.
	eval[bool](p, fmt.Sprintf(`(() => { const b = document.querySelector(%q); b.focus(); b.sluiceMark = true; return true; })()`, keyedRow+` button[data-op="reset"]`))
	eval[bool](p, `(() => { const c = document.querySelector('#cb-table tr[data-breaker-key="f_keyed|k00"] code.key'); const r = document.createRange(); r.selectNodeContents(c); getSelection().removeAllRanges(); getSelection().addRange(r); return true; })()`)
	eval[bool](p, `window.scrollTo(0, 300), true`)
	scrolled := eval[float64](p, `window.scrollY`)
	p.afterPolls(5)
	if !eval[bool](p, `document.activeElement.sluiceMark === true`) {
		t.Errorf("focus lost after 5 polls: now on %s", eval[string](p, `document.activeElement.tagName + " " + document.activeElement.textContent`))
	}
	if got := eval[string](p, `getSelection().toString()`); got != "k00" {
		t.Errorf("selection after 5 polls %q, want k00", got)
	}
	if got := eval[float64](p, `window.scrollY`); got != scrolled || scrolled == 0 {
		t.Errorf("scroll after 5 polls %v, want %v (not 0)", got, scrolled)
	}
	// 7. The tabs stay on screen while the page scrolls.
	if top := eval[float64](p, `document.querySelector("header").getBoundingClientRect().top`); top != 0 {
		t.Errorf("scrolled by %v px, the tabs are at %v, want 0 (sticky)", scrolled, top)
	}

	// 4. Canaries: where traffic goes.
	p.show("canaries")
	canary := `#gray-table tr[data-gray="f_canary"]`
	// The counters are the process's: other tests in this binary may have
	// sent gray traffic too, so the figures are read from /sluice/state.
	unmatched, all := graySplit(t, adminURL)
	if unmatched < 30 || all < 40 {
		t.Fatalf("/sluice/state: %d of %d gray decisions matched no rule, want at least 30 of 40", unmatched, all)
	}
	share := fmt.Sprintf("%d of %d requests (", unmatched, all)
	p.waitFor(10*time.Second, "unmatched share "+share, fmt.Sprintf(`(document.querySelector('#gray-summary [data-summary="unmatched"]') || {textContent: ""}).textContent.replace(/,/g, "").startsWith(%q)`, share))
	var pctShown float64
	fmt.Sscanf(strings.TrimPrefix(strings.ReplaceAll(p.text(`#gray-summary [data-summary="unmatched"]`), ",", ""), share), "%g", &pctShown)
	if want := 100 * float64(unmatched) / float64(all); pctShown < want-0.051 || pctShown > want+0.051 {
		t.Errorf("unmatched share shown %.1f%%, want %.2f%%", pctShown, want)
	}
	if got := p.text("#gray-table tbody tr:first-child"); !strings.HasPrefix(got, "f_canary") {
		t.Errorf("first canary row %q, want f_canary (in use) first", got)
	}
	if got := p.text(canary + " td.match"); got != "X-Canary = yes" {
		t.Errorf("f_canary match %q", got)
	}
	if got := p.text(canary + " .fallback"); got != "v1" {
		t.Errorf("f_canary fallback %q, want v1", got)
	}
	if !p.has(`#gray-table tr[data-gray="f_idle"] .badge.unused`) || p.has(canary+" .badge.unused") {
		t.Error("f_idle (no handler uses it) not marked unused, or f_canary marked")
	}
	if err := chromedp.Do(p.ctx, chromedp.SendKeys(chromedp.CSS("#gray-filter"), "unused")); err != nil {
		t.Fatal(err)
	}
	if got := eval[string](p, `[...document.querySelectorAll("#gray-table tbody tr")].map(r => r.dataset.gray).join(" ")`); got != "f_idle" {
		t.Errorf("canaries filtered by unused: %q, want f_idle", got)
	}
	eval[bool](p, `(() => { const f = document.getElementById("gray-filter"); f.value = ""; f.dispatchEvent(new Event("input")); return true; })()`)

	// 1. Closing a dialog gives focus back to its opener.
	weightBtn := canary + ` button[data-action="weight"]`
	eval[bool](p, fmt.Sprintf(`(() => { const b = document.querySelector(%q); b.focus(); b.sluiceMark = true; b.click(); return true; })()`, weightBtn))
	p.waitFor(10*time.Second, "weight dialog", `document.getElementById("confirm").open && !!document.getElementById("weight-input")`)
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS("#confirm-cancel"))); err != nil {
		t.Fatal(err)
	}
	p.waitFor(10*time.Second, "focus back on Set weight", `!document.getElementById("confirm").open && document.activeElement.sluiceMark === true`)

	// 3/11. Bad versions pushed to Redis: each rule is marked on every tab
	// where it appears, and on its own page with the bad and the good value.
	redistest.Push(t, rc, "gray:rule:f_canary", "gateway:rules:gray", "f_canary", "weight", "150")
	redistest.Push(t, rc, "rate_limit:rule:f_limit", "gateway:rules:rate_limit", "f_limit", "qps", "lots")
	redistest.Push(t, rc, "circuit_breaker:rule:f_keyed", "gateway:rules:circuit_breaker", "f_keyed", "failure_threshold", "-1")
	if err := rc.HSet(t.Context(), "rate_limit:rule:bad id", "qps", "1").Err(); err != nil {
		t.Fatal(err)
	}
	marked := map[string]string{
		"overview":   `#problems [data-problem="gray/f_canary"]`,
		"ratelimits": `#rl-table tr[data-rule="f_limit"] [data-health="rejected"]`,
		"breakers":   `#cb-table tr[data-breaker="f_keyed"] [data-health="rejected"]`,
		"canaries":   canary + ` [data-health="rejected"]`,
		"rules":      `#rules-table tr[data-rule="f_canary"] [data-health="rejected"]`,
	}
	for _, tab := range []string{"canaries", "overview", "ratelimits", "breakers", "rules"} {
		p.show(tab)
		p.waitFor(20*time.Second, "rejected rule marked on "+tab, fmt.Sprintf(`!!document.querySelector(%q)`, marked[tab]))
	}
	// The key with an invalid id, skipped by the store, is listed.
	p.waitFor(20*time.Second, "skipped id listed", `!!document.querySelector('#rules-table tr[data-rule="bad id"] [data-health="skipped"]')`)
	eval[bool](p, `location.hash = "#rule/gray/f_canary", true`)
	p.waitFor(10*time.Second, "rejection on the rule's page", `!!document.querySelector('#detail-health [data-health="rejected"]')`)
	if bad, good := p.text("#detail-health .stored"), p.text("#detail-health .last-good"); !strings.Contains(bad, "weight=150") || !strings.Contains(good, "weight=100") {
		t.Errorf("rule page: stored %q (want weight=150), in force %q (want weight=100)", bad, good)
	}

	// 6. Resyncs (every second here) do not count the same rejections again.
	p.show("overview")
	rejectedCard := `([...document.querySelectorAll("#overview-cards .card")].find(c => c.querySelector(".label").textContent === "Rejected from Redis") || {textContent: ""}).querySelector(".value").textContent`
	p.waitFor(10*time.Second, "3 rules rejected", rejectedCard+` === "3"`)
	type storeStatus struct {
		Resyncs  int64 `json:"resyncs"`
		Rejected int64 `json:"rejected"`
	}
	status := func() storeStatus {
		_, body := testcaddy.Get(t, adminURL+"/sluice/store")
		var s storeStatus
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := status()
	testcaddy.Eventually(t, 20*time.Second, "3 more resyncs", func() bool { return status().Resyncs >= before.Resyncs+3 })
	if after := status(); after.Rejected != before.Rejected {
		t.Errorf("rejections counted %d before and %d after %d resyncs of the same bad rules", before.Rejected, after.Rejected, after.Resyncs-before.Resyncs)
	}
	if got := eval[string](p, rejectedCard); got != "3" {
		t.Errorf("Rejected from Redis %q after the resyncs, want 3", got)
	}

	// 9. The filter reads fields, sources and health; problems only.
	p.show("rules")
	filter := func(text string) []string {
		t.Helper()
		eval[bool](p, fmt.Sprintf(`(() => { const f = document.getElementById("rule-filter"); f.value = %q; f.dispatchEvent(new Event("input")); return true; })()`, text))
		return eval[[]string](p, `[...document.querySelectorAll("#rules-table tbody tr[data-rule]")].map(r => r.dataset.rule)`)
	}
	if got := filter("x-canary"); strings.Join(got, " ") != "f_canary" {
		t.Errorf(`filter "x-canary": %v, want f_canary`, got)
	}
	if got := filter("rejected"); len(got) != 3 {
		t.Errorf(`filter "rejected": %v, want the 3 rejected rules`, got)
	}
	if got := filter("redis"); len(got) == 0 {
		t.Error(`filter "redis" finds nothing`)
	}
	filter("")
	eval[bool](p, `document.getElementById("problems-only").click(), true`)
	if got := eval[[]string](p, `[...document.querySelectorAll("#rules-table tbody tr[data-rule]")].map(r => r.dataset.rule)`); len(got) != 4 {
		t.Errorf("problems only: %v, want the 3 rejected rules and the skipped id", got)
	}
	eval[bool](p, `document.getElementById("problems-only").click(), true`)

	// 12. Every text on every tab has 4.5:1 contrast; the sparkline tells
	// refused from allowed by its dash, not by colour alone.
	for _, tab := range []string{"overview", "ratelimits", "breakers", "canaries", "rules"} {
		p.show(tab)
		p.afterPolls(1)
		if low := eval[[]string](p, lowContrast); len(low) > 0 {
			t.Errorf("%s: text under 4.5:1 contrast: %q", tab, low)
		}
		if tab == "ratelimits" {
			if dash := eval[string](p, `getComputedStyle(document.querySelector("svg.spark .refused")).strokeDasharray`); dash == "none" || dash == "" {
				t.Error("the refused line of the sparkline is not dashed")
			}
		}
	}
	dir := os.Getenv("SLUICE_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	p.show("breakers")
	eval[bool](p, `window.scrollTo(0, 0), true`)
	screenshot(t, p, filepath.Join(dir, "status-desktop.png"), 1280)

	// 7. A 390 px phone: no horizontal scroll on any tab, Actions on
	// screen, tab names on one line.
	if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	for _, tab := range []string{"overview", "ratelimits", "breakers", "canaries", "rules"} {
		p.show(tab)
		p.afterPolls(1)
		if w := eval[int](p, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s at 390 px: the page is %d px wide", tab, w)
		}
		if n := eval[int](p, `[...document.querySelectorAll("#tabs a")].filter(a => a.getClientRects().length !== 1 || a.getBoundingClientRect().height > 40).length`); n != 0 {
			t.Errorf("%s at 390 px: %d tab names wrap", tab, n)
		}
	}
	p.show("breakers")
	if right := eval[float64](p, fmt.Sprintf(`document.querySelector(%q).getBoundingClientRect().right`, keyedRow+` button[data-op="force_open"]`)); right > 390 {
		t.Errorf("at 390 px the Force open button ends at %v px, off screen", right)
	}
	p.show("canaries")
	eval[bool](p, `window.scrollTo(0, 0), true`)
	screenshot(t, p, filepath.Join(dir, "status-phone.png"), 390)
	if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(1280, 700)); err != nil {
		t.Fatal(err)
	}

	// sluice_status: the page and the read API on an ordinary site, read-only
	// unless allow_writes; behind basic_auth here.
	// What the "" admin origin admits (docs/status-page.md): no Origin, an
	// Origin with an empty host, and a request with no Host; not another site.
	for _, c := range []struct {
		origin string
		want   int
	}{{"", 200}, {"file://", 200}, {"x:", 200}, {"http://evil.example", 403}, {"null", 400}} {
		req, _ := http.NewRequest(http.MethodGet, adminURL+"/sluice/store", nil)
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if resp, body := testcaddy.Do(t, req); resp.StatusCode != c.want {
			t.Errorf("admin with origin %q: %d %s, want %d", c.origin, resp.StatusCode, body, c.want)
		}
	}
	if got := rawStatus(t, fmt.Sprintf("localhost:%d", admin), "GET /sluice/store HTTP/1.0\r\n\r\n"); got != "200" {
		t.Errorf("admin request with no Host header: %s, want 200", got)
	}
	if got := rawStatus(t, fmt.Sprintf("localhost:%d", admin), "GET /sluice/store HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"); got != "403" {
		t.Errorf("admin request for another host: %s, want 403", got)
	}

	for _, c := range []struct {
		method, url string
		headers     []string
		want        int
	}{
		{"GET", roURL + "/ops/sluice/state", nil, 200},
		{"GET", roURL + "/ops/sluice/ui/breaker_keys.json?rule=f_keyed&q=k0", nil, 200},
		{"PUT", roURL + "/ops/sluice/rules/rate_limit/f_limit", nil, 403},
		{"POST", roURL + "/ops/sluice/breakers/f_keyed/force_open", nil, 403},
		{"GET", authURL + "/sluice/state", nil, 401},
		{"GET", authURL + "/sluice/state", []string{"Authorization", "Basic b3BzOnMzY3JldA=="}, 200},
		{"PUT", authURL + "/sluice/rules/rate_limit/f_limit", []string{"Authorization", "Basic b3BzOnMzY3JldA==", "Origin", "http://evil.example"}, 403},
		{"PUT", authURL + "/sluice/rules/rate_limit/f_limit", []string{"Authorization", "Basic b3BzOnMzY3JldA=="}, 200},
	} {
		req, _ := http.NewRequest(c.method, c.url, strings.NewReader(`{"qps": "9", "key_resolver": "global"}`))
		for i := 0; i+1 < len(c.headers); i += 2 {
			req.Header.Set(c.headers[i], c.headers[i+1])
		}
		if resp, body := testcaddy.Do(t, req); resp.StatusCode != c.want {
			t.Errorf("%s %s %v: %d %s, want %d", c.method, c.url, c.headers, resp.StatusCode, body, c.want)
		}
	}
	p.open(roURL + "/ops/sluice/ui/#canaries")
	p.waitFor(10*time.Second, "read-only site: Set weight disabled", fmt.Sprintf(`!!document.querySelector(%q) && document.querySelector(%q).disabled && document.getElementById("redis-banner").textContent.includes("read-only")`, weightBtn, weightBtn))

	// 8. Redis down: said on every tab; the editor cannot Apply.
	p.open(adminURL + "/sluice/ui/#rule/rate_limit/f_limit")
	p.waitFor(10*time.Second, "editor", `!!document.querySelector('#detail-body button[data-action="apply"]')`)
	r.Kill()
	p.waitFor(30*time.Second, "Apply disabled with Redis down", `document.querySelector('#detail-body button[data-action="apply"]').disabled && document.getElementById("write-blocked").textContent.includes("Redis is unreachable")`)
	for _, tab := range []string{"overview", "ratelimits", "breakers", "canaries", "rules"} {
		p.show(tab)
		if !eval[bool](p, `!document.getElementById("redis-banner").hidden && document.getElementById("redis-banner").textContent.includes("Redis is unreachable")`) {
			t.Errorf("%s: Redis down not shown", tab)
		}
	}
	p.waitFor(10*time.Second, "rules from Redis marked stale", `!!document.querySelector('#rules-table tr[data-rule="f_redis"] [data-health="stale"]')`)

	var errs []string
	for _, e := range consoleErrors() {
		// With Redis killed, the change feed answers 502 by design.
		if strings.Contains(e, "502") && strings.Contains(e, "changes.json") {
			continue
		}
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// graySplit reads how many gray decisions matched no rule, of all.
func graySplit(t *testing.T, adminURL string) (unmatched, all int64) {
	t.Helper()
	_, body := testcaddy.Get(t, adminURL+"/sluice/state")
	var st struct {
		Grayroute struct {
			Rules []struct {
				Rule     string           `json:"rule"`
				Versions map[string]int64 `json:"versions"`
			} `json:"rules"`
		} `json:"grayroute"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Grayroute.Rules {
		for _, n := range r.Versions {
			all += n
			if r.Rule == "" {
				unmatched += n
			}
		}
	}
	return unmatched, all
}

// rawStatus sends a raw HTTP request and returns the response's status code.
func rawStatus(t *testing.T, addr, request string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if f := strings.Fields(line); len(f) >= 2 {
		return f[1]
	}
	return line
}

// screenshot saves the viewport as a PNG and checks it is width px wide.
func screenshot(t *testing.T, p *page, path string, width int) {
	t.Helper()
	img, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil || cfg.Width != width {
		t.Fatalf("screenshot %s: %v, %d px wide, want %d", path, err, cfg.Width, width)
	}
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot saved to %s", path)
}
