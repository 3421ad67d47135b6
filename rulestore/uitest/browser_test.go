package uitest

// The status page in a real browser: Debian's headless Chromium, driven over
// the DevTools protocol, against real Caddy (in this process), real Redis and
// live traffic. Every assertion reads the rendered DOM.
//
// SLUICE_SCREENSHOT=<path> also saves a PNG of the page (make screenshot).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	_ "github.com/sluicegw/sluice" // every Sluice module, as in the built binary
	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

const (
	bulkRules     = 1000 // rate-limit rules pushed to Redis
	keyedBreakers = 5    // keyed breaker rules...
	keysPerRule   = 20   // ...with this many keys each: 100 breaker keys on the page
)

// chromiumPath finds Debian's chromium; the test fails without it (make
// test installs it: scripts/ensure-chromium.sh).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: run scripts/ensure-chromium.sh (make test does)")
	return ""
}

func uiCaddyfile(admin, site int, redisURL, upstream, storage string) string {
	var b strings.Builder
	// origins: the admin defaults plus "", the origin of a typed or
	// bookmarked navigation, which Caddy refuses otherwise (docs/status-page.md).
	fmt.Fprintf(&b, `{
	admin localhost:%[1]d {
		origins localhost:%[1]d 127.0.0.1:%[1]d [::1]:%[1]d ""
	}
	persist_config off
	storage file_system %s
	rulestore {
		redis %s
		rate_limit ui_limited {
			qps 1
			burst 2
			key_resolver userId
		}
		circuit_breaker ui_breaker {
			failure_threshold 3
			open_duration 5m
		}
		gray ui_canary {
			target_version v2
			weight 10
		}
		gray ui_analysed {
			target_version v2
			fallback_version v1
			analysis on
			analysis_interval 1s
			weight 50
			step_weight 10
			min_samples 1000000
		}
`, admin, storage, redisURL)
	for i := 0; i < keyedBreakers; i++ {
		fmt.Fprintf(&b, "\t\tcircuit_breaker ui_keyed_%d {\n\t\t\tfailure_threshold 1000\n\t\t\tkey {http.request.header.X-Key}\n\t\t}\n", i)
	}
	fmt.Fprintf(&b, `	}
}
http://127.0.0.1:%d {
	route /limited {
		ratelimit ui_limited
		respond "ok"
	}
	route /flaky {
		circuitbreaker ui_breaker
		reverse_proxy %s
	}
	route /gray {
		grayroute ui_canary
		respond "ok"
	}
	route /analysed {
		grayroute ui_analysed
		@v2 vars gray_version v2
		respond @v2 "v2 down" 500
		respond "v1"
	}
`, site, upstream)
	for i := 0; i < keyedBreakers; i++ {
		fmt.Fprintf(&b, "\troute /keyed/%d {\n\t\tcircuitbreaker ui_keyed_%d\n\t\trespond \"ok\"\n\t}\n", i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

var trafficClient = &http.Client{Timeout: 10 * time.Second}

// page drives one tab.
type page struct {
	t   *testing.T
	ctx context.Context
}

// eval runs JavaScript in the page and returns its value.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds; it returns how long
// that took.
// With polls, it also stores the page's poll count read with the condition.
func (p *page) waitFor(timeout time.Duration, what, js string, polls ...*int64) time.Duration {
	p.t.Helper()
	start := time.Now()
	testcaddy.Eventually(p.t, timeout, what, func() bool {
		n := eval[int64](p, fmt.Sprintf(`(%s) ? (window.sluiceStats ? window.sluiceStats.polls : 0) : -1`, js))
		for _, out := range polls {
			*out = n
		}
		return n >= 0
	})
	return time.Since(start)
}

// text is the text of the first element matching a CSS selector ("" if none).
func (p *page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel))
}

// number reads a number the page rendered with thousands separators.
func (p *page) number(sel string) int64 {
	p.t.Helper()
	var n int64
	fmt.Sscan(strings.ReplaceAll(p.text(sel), ",", ""), &n)
	return n
}

// click clicks a table button from script: the tables are re-rendered every
// second, so a pointer click computed from a node's box could land on its
// replacement mid-render. The dialog's own buttons get real pointer clicks.
func (p *page) click(sel string) {
	p.t.Helper()
	if !eval[bool](p, fmt.Sprintf(`(() => { const b = document.querySelector(%q); if (b) b.click(); return !!b; })()`, sel)) {
		p.t.Fatalf("no button %s", sel)
	}
}

// confirm waits for the confirm dialog and clicks its Confirm button.
func (p *page) confirm(title string) {
	p.t.Helper()
	p.waitFor(10*time.Second, "confirm dialog "+title, `document.getElementById("confirm").open`)
	if got := p.text("#confirm-title"); !strings.Contains(got, title) {
		p.t.Fatalf("confirm dialog %q, want %q", got, title)
	}
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS("#confirm-ok"))); err != nil {
		p.t.Fatalf("click Confirm: %v", err)
	}
	// Closed, or already showing the next step's question.
	p.waitFor(10*time.Second, "confirm dialog closed", fmt.Sprintf(
		`!document.getElementById("confirm").open || !document.getElementById("confirm-title").textContent.includes(%q)`, title))
}

func (p *page) show(tab string) {
	p.t.Helper()
	eval[bool](p, fmt.Sprintf(`location.hash = %q, true`, "#"+tab))
	p.waitFor(10*time.Second, "tab "+tab, fmt.Sprintf(`document.getElementById(%q).classList.contains("active")`, tab))
}

// polls is how many polls the page has rendered.
func (p *page) polls() int64 { return eval[int64](p, `window.sluiceStats.polls`) }

// load sends requests from one client until stop is closed.
func load(ctx context.Context, wg *sync.WaitGroup, every time.Duration, send func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				send()
			}
		}
	}()
}

func TestStatusPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Chromium, Caddy and Redis; skipped under -short")
	}
	r := redistest.Start(t)
	rc := r.Client()
	ctx := context.Background()
	pipe := rc.Pipeline()
	for i := 0; i < bulkRules; i++ {
		pipe.HSet(ctx, fmt.Sprintf("rate_limit:rule:bulk_%04d", i), "qps", 100+i, "key_resolver", "global")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream failing", http.StatusInternalServerError)
	}))
	defer upstream.Close()
	admin, site := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, uiCaddyfile(admin, site, r.URL(), upstream.URL, t.TempDir()))
	adminURL := fmt.Sprintf("http://localhost:%d", admin)
	siteURL := fmt.Sprintf("http://127.0.0.1:%d", site)
	testcaddy.Eventually(t, 20*time.Second, "1,000 rules from Redis in force", func() bool {
		_, body := testcaddy.Get(t, adminURL+"/sluice/store")
		return strings.Contains(body, fmt.Sprintf(`"rate_limit":%d`, bulkRules+1))
	})

	// Live traffic: alice over her limit, the canary split, 100 breaker keys.
	get := func(path string, headers ...string) int {
		req, _ := http.NewRequest(http.MethodGet, siteURL+path, nil)
		for _, h := range headers {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(k, strings.TrimSpace(v))
		}
		resp, err := trafficClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := 0; i < keyedBreakers; i++ {
		for k := 0; k < keysPerRule; k++ {
			if code := get(fmt.Sprintf("/keyed/%d", i), fmt.Sprintf("X-Key: k%02d", k)); code != 200 {
				t.Fatalf("keyed breaker request: %d", code)
			}
		}
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopLoad()
	var limited atomic.Int64
	load(loadCtx, &wg, 50*time.Millisecond, func() {
		if get("/limited", "X-User-Id: alice") == http.StatusTooManyRequests {
			limited.Add(1)
		}
	})
	load(loadCtx, &wg, 100*time.Millisecond, func() { get("/gray") })
	// The analysed canary: v2 always fails, v1 never; min_samples is out of
	// reach, so every verdict holds (inconclusive) and the weight stays put.
	var users atomic.Int64
	load(loadCtx, &wg, 50*time.Millisecond, func() { get("/analysed", fmt.Sprintf("X-User-Id: u%d", users.Add(1))) })

	p, consoleErrors := browser(t, 1500, 1100)
	tab := p.ctx
	p.open(adminURL + "/sluice/ui/")

	// Overview: connected to Redis, every rule counted.
	if got := p.text("#overview-cards"); !strings.Contains(got, "connected") {
		t.Errorf("overview shows %q, want Redis connected", got)
	}
	if got := p.number(`#kinds tr[data-kind="rate_limit"] td.num`); got != bulkRules+1 {
		t.Errorf("overview: %d rate-limit rules, want %d", got, bulkRules+1)
	}
	// One Caddy follows this Redis (its heartbeat), and the initial load
	// was a resync.
	card := func(label string) string {
		return fmt.Sprintf(`([...document.querySelectorAll("#overview-cards .card")].find(c => c.querySelector(".label").textContent === %q) || {querySelector: () => ({textContent: ""})}).querySelector(".value").textContent`, label)
	}
	p.waitFor(20*time.Second, "one live instance", card("Live instances")+` === "1"`)
	if got := eval[string](p, card("Last resync")); !strings.HasSuffix(got, " ago") {
		t.Errorf("overview: last resync %q, want a time and how long ago", got)
	}

	// A bad rule pushed to Redis is counted in red (the store keeps no
	// rule for it; the last good version, here none, stays in force).
	redistest.Push(t, rc, "rate_limit:rule:ui_bad", "gateway:rules:rate_limit", "ui_bad", "qps", "5", "no_such_field", "1")
	p.waitFor(10*time.Second, "rejected rule counted in red", `[...document.querySelectorAll("#overview-cards .card")].some(c =>
		c.textContent.startsWith("Rejected from Redis") && !!c.querySelector(".value.bad") && parseInt(c.querySelector(".value").textContent) >= 1)`)
	// ...and listed in red with the field and the reason.
	bad := `#problems [data-problem="rate_limit/ui_bad"]`
	p.waitFor(10*time.Second, "rejected rule listed", fmt.Sprintf(`!!document.querySelector(%q)`, bad))
	if got := p.text(bad); !strings.Contains(got, "rejected") || !strings.Contains(got, "field no_such_field") {
		t.Errorf("rejected rule shown as %q, want rejected with field no_such_field and the reason", got)
	}
	if !eval[bool](p, `document.querySelector("#problems h2").classList.contains("bad")`) {
		t.Error("the invalid rules heading is not red")
	}

	// Rate limits: alice's refusals rise on the page while she is limited.
	p.show("ratelimits")
	row := `#rl-table tr[data-rule="ui_limited"]`
	p.waitFor(20*time.Second, "ui_limited refusals shown", fmt.Sprintf(`!!document.querySelector(%q) && parseInt(document.querySelector(%q).textContent.replace(/,/g, "")) > 0`, row+" td.refused-total", row+" td.refused-total"))
	first := p.number(row + " td.refused-total")
	p.waitFor(20*time.Second, "refused count rising", fmt.Sprintf(`parseInt(document.querySelector(%q).textContent.replace(/,/g, "")) > %d`, row+" td.refused-total", first))
	if limited.Load() == 0 {
		t.Fatal("the client was never refused, yet the page counts refusals")
	}
	p.waitFor(20*time.Second, "refused per second above zero", fmt.Sprintf(`parseFloat(document.querySelector(%q).textContent) > 0`, row+" td.refused-rate"))
	if n := eval[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, row+" svg.spark polyline.refused")); n != 1 {
		t.Errorf("sparkline: %d refused lines, want 1", n)
	}
	// Top keys are masked: the page never shows alice's id.
	if got := p.text(row); !strings.Contains(got, "user:sha256:") || strings.Contains(eval[string](p, `document.body.innerHTML`), "alice") {
		t.Errorf("top keys not masked: %q", got)
	}

	// Breakers: trip ui_breaker with real failures; the page shows it open
	// at the latest on the second poll that completes after the trip.
	p.show("breakers")
	p.waitFor(20*time.Second, "ui_breaker listed closed", `!!document.querySelector('#cb-table tr[data-breaker="ui_breaker"] .badge.closed')`)
	polls0 := int64(0)
	var tripped time.Time
	for i := 0; i < 20 && tripped.IsZero(); i++ {
		if get("/flaky") == http.StatusServiceUnavailable {
			tripped = time.Now()
			polls0 = p.polls()
		}
	}
	if tripped.IsZero() {
		t.Fatal("the breaker did not open after 20 failing requests")
	}
	// One evaluation reads the badge and the poll count together (a poll
	// renders and counts in one task), so later polls do not blur the count.
	var shownAt int64
	shownAfter := p.waitFor(20*time.Second, "ui_breaker shown open", `!!document.querySelector('#cb-table tr[data-breaker="ui_breaker"] .badge.open')`, &shownAt)
	pollsToShow := shownAt - polls0
	t.Logf("breaker open: shown %v after the trip, %d polls later", shownAfter.Round(time.Millisecond), pollsToShow)
	if pollsToShow > 2 {
		t.Errorf("the page showed the open breaker %d polls after the trip, want at most 2 (one second apart)", pollsToShow)
	}
	if got := p.text(`#cb-table tr[data-breaker="ui_breaker"] td.half-open`); !strings.HasSuffix(got, " s") {
		t.Errorf("time to half-open %q, want seconds", got)
	}
	p.waitFor(10*time.Second, "transition closed -> open listed", `[...document.querySelectorAll("#cb-transitions tr")].some(r => r.textContent.includes("ui_breaker") && r.textContent.includes("open"))`)

	// Action: force closed, through the confirm dialog.
	p.click(`#cb-table tr[data-breaker="ui_breaker"] button[data-op="force_closed"]`)
	p.confirm("Force closed: ui_breaker")
	p.waitFor(10*time.Second, "ui_breaker shown force-closed", `(() => { const r = document.querySelector('#cb-table tr[data-breaker="ui_breaker"]'); return !!r && !!r.querySelector(".badge.forced_closed") && r.querySelector("td.mode").textContent.includes("force_closed"); })()`)
	if code := get("/flaky"); code != http.StatusInternalServerError {
		t.Errorf("after force closed, a request got %d, want the upstream's 500 (the breaker lets it through)", code)
	}
	// Force open and Auto on a keyed rule (ui_breaker stays force-closed
	// for the screenshot): every key refused, then served again.
	keyed := `#cb-table tr[data-breaker="ui_keyed_0"]`
	p.click(keyed + ` button[data-op="force_open"]`)
	p.confirm("Force open: ui_keyed_0")
	p.waitFor(10*time.Second, "ui_keyed_0 shown force-open", fmt.Sprintf(`(() => { const r = document.querySelector(%q); return !!r && !!r.querySelector(".badge.forced_open") && r.querySelector("td.mode").textContent.includes("force_open") &&
		!!document.querySelector('#cb-table tr[data-breaker-key^="ui_keyed_0|"] .badge.forced_open'); })()`, keyed))
	if code := get("/keyed/0", "X-Key: k00"); code != http.StatusServiceUnavailable {
		t.Errorf("after force open, a request got %d, want 503", code)
	}
	p.click(keyed + ` button[data-op="reset"]`)
	p.confirm("Auto (drop the override): ui_keyed_0")
	p.waitFor(10*time.Second, "ui_keyed_0 back to auto", fmt.Sprintf(`(() => { const r = document.querySelector(%q); return !!r && !!r.querySelector(".badge.closed") && r.querySelector("td.mode").textContent === "auto" &&
		!document.querySelector('#cb-table tr[data-breaker-key^="ui_keyed_0|"] .badge.forced_open'); })()`, keyed))
	if code := get("/keyed/0", "X-Key: k00"); code != http.StatusOK {
		t.Errorf("after Auto, a request got %d, want 200", code)
	}

	// 100 breaker keys on the page, re-rendered every poll.
	p.waitFor(10*time.Second, "100 breaker keys listed", fmt.Sprintf(`document.querySelectorAll("#cb-table tr[data-breaker-key]").length >= %d`, keyedBreakers*keysPerRule))

	// Canaries: the weight in force, then the set-weight action (two confirms:
	// the new weight, then the diff).
	p.show("canaries")
	p.waitFor(10*time.Second, "canary listed with weight 10%", `(document.querySelector('#gray-table tr[data-gray="ui_canary"] td.weight') || {}).textContent === "10%"`)
	p.waitFor(10*time.Second, "per-version counts", `!!document.querySelector('#gray-table tr[data-gray="ui_canary"] [data-version]')`)
	p.click(`#gray-table tr[data-gray="ui_canary"] button[data-action="weight"]`)
	p.waitFor(10*time.Second, "weight input", `!!document.getElementById("weight-input")`)
	if err := chromedp.Do(tab, chromedp.SetValue(chromedp.CSS("#weight-input"), "25")); err != nil {
		t.Fatal(err)
	}
	p.confirm("Set the weight of ui_canary")
	p.confirm("Write gray rule ui_canary?")
	p.waitFor(10*time.Second, "canary shown at 25%", `(document.querySelector('#gray-table tr[data-gray="ui_canary"] td.weight') || {}).textContent === "25%"`)
	// Only the weight joins the Caddyfile rule's overlay (a PATCH), so the
	// declared fields stay the config's.
	if _, body := testcaddy.Get(t, adminURL+"/sluice/rules/gray/ui_canary"); !strings.Contains(body, `"weight":"25"`) ||
		!strings.Contains(body, `"overlay":{"weight":"25"}`) {
		t.Errorf("gray rule after set weight: %s", body)
	}

	// The analysed canary: state, the weight in force and the newest
	// verdict, with each version's requests and errors.
	an := `#gray-table tr[data-gray="ui_analysed"]`
	p.waitFor(20*time.Second, "analysis verdict shown", fmt.Sprintf(`!!document.querySelector(%q)`, an+` .analysis .badge.inconclusive`))
	if got := p.text(an + " td.state"); got != "running" {
		t.Errorf("analysed canary state %q, want running", got)
	}
	if got := p.text(an + " td.weight"); got != "50%" {
		t.Errorf("analysed canary weight %q, want 50%%", got)
	}
	if got := p.text(an + " .analysis .action"); got != "hold" {
		t.Errorf("analysed canary action %q, want hold", got)
	}
	canaryErrs, baseErrs := p.text(an+` .analysis [data-version="v2"]`), p.text(an+` .analysis [data-version="v1"]`)
	if !strings.Contains(canaryErrs, "(100.0%)") || !strings.Contains(baseErrs, " 0 errors (0.0%)") {
		t.Errorf("analysed canary errors: canary %q (want 100.0%%), baseline %q (want 0 errors)", canaryErrs, baseErrs)
	}

	// 1,000 rules: the rules tab renders them, and every poll of the
	// breakers tab (100 keys) stays far inside the 1 s poll interval.
	p.show("rules")
	rulesShown := p.waitFor(30*time.Second, "1,000 rules listed", fmt.Sprintf(`document.querySelectorAll("#rules-table tr[data-rule]").length >= %d`, bulkRules))
	renderRules := eval[float64](p, `(() => { const t = performance.now(); document.getElementById("rule-filter").dispatchEvent(new Event("input")); return performance.now() - t; })()`)
	p.show("breakers")
	eval[bool](p, `window.sluiceStats.maxRenderMs = 0, window.sluiceStats.maxUpdateMs = 0, true`)
	start := p.polls()
	p.waitFor(30*time.Second, "five polls of the breakers tab", fmt.Sprintf(`window.sluiceStats.polls >= %d`, start+5))
	maxRender := eval[float64](p, `window.sluiceStats.maxRenderMs`)
	maxUpdate := eval[float64](p, `window.sluiceStats.maxUpdateMs`)
	t.Logf("responsiveness: %d rules listed %v after opening the tab, rules table re-render %.1f ms; breakers tab (%d keys): render max %.1f ms, poll+render max %.1f ms over 5 polls",
		bulkRules+1, rulesShown.Round(time.Millisecond), renderRules, keyedBreakers*keysPerRule, maxRender, maxUpdate)
	// Generous bounds, 3-5 times the worst seen on this busy 2-core machine
	// (rules 550 ms, breakers 280 ms, poll+render 1,050 ms, which includes
	// Caddy's answer under -race): the 1,000-row table renders only when the
	// rules change; the breakers tab renders every second and must not hold
	// the page for a second. poll+render includes Caddy's answer, which
	// waits on the machine: with three suites side by side it read 5.9 s,
	// so its bound only catches a poll that hangs.
	if renderRules > 2000 || maxRender > 1000 || maxUpdate > 15000 {
		t.Errorf("page not responsive: rules render %.1f ms (max 2000), breakers render %.1f ms (max 1000), update %.1f ms (max 15000)", renderRules, maxRender, maxUpdate)
	}

	// Rule detail: fields and source.
	eval[bool](p, `location.hash = "#rule/rate_limit/bulk_0042", true`)
	p.waitFor(10*time.Second, "rule detail", `!!document.getElementById("detail-fields") && document.getElementById("detail-body").textContent.includes("bulk_0042")`)
	if got := p.text("#detail-body"); !strings.Contains(got, "Source: redis") || !strings.Contains(got, "142") {
		t.Errorf("rule detail %q, want source redis and qps 142", got)
	}
	// A rule held only in Redis is no overlay: every field is from redis.
	if got := p.text("#detail-fields"); strings.Contains(got, "overlay") || !strings.Contains(got, "qps142redis") {
		t.Errorf("rule detail fields %q, want each from redis", got)
	}

	// Edit it: an invalid value is refused with the reason and changes
	// nothing; a valid one is written after the confirm.
	// The store answers ?dry_run=true (it sends an ETag), so an invalid edit
	// is refused by the dry run before any confirm is shown.
	edit := func(fields string, confirm bool) {
		t.Helper()
		if err := chromedp.Do(tab, chromedp.SetValue(chromedp.CSS("#edit-fields"), fields)); err != nil {
			t.Fatal(err)
		}
		p.click(`button[data-action="apply"]`)
		if confirm {
			p.confirm("Write rate_limit rule bulk_0042?")
		}
	}
	edit(`{"qps": "lots", "key_resolver": "global"}`, false)
	p.waitFor(10*time.Second, "invalid edit refused", `(document.getElementById("edit-result") || {textContent: ""}).textContent.includes("qps")`)
	if _, body := testcaddy.Get(t, adminURL+"/sluice/rules/rate_limit/bulk_0042"); !strings.Contains(body, `"qps":"142"`) {
		t.Errorf("after an invalid edit the rule changed: %s", body)
	}
	edit(`{"qps": "7", "key_resolver": "global"}`, true)
	p.waitFor(10*time.Second, "edit applied and shown", `(document.getElementById("detail-fields") || {textContent: ""}).textContent.includes("qps7")`)
	if _, body := testcaddy.Get(t, adminURL+"/sluice/rules/rate_limit/bulk_0042"); !strings.Contains(body, `"qps":"7"`) {
		t.Errorf("after the edit: %s", body)
	}
	// The rule's history lists the edit, made through the admin API.
	p.waitFor(10*time.Second, "edit in the history", `!!document.getElementById("detail-history")`)
	if got := p.text("#detail-history tr:nth-child(2)"); !strings.Contains(got, "upsert") || !strings.Contains(got, "admin_api") || !strings.Contains(got, "qps=7") {
		t.Errorf("newest history entry %q, want the upsert of qps=7 through admin_api", got)
	}

	// Someone else changes the rule while it is open: Apply is refused
	// (If-Match, 412) with the reason, and their change stands.
	req, _ := http.NewRequest(http.MethodPut, adminURL+"/sluice/rules/rate_limit/bulk_0042", strings.NewReader(`{"qps": "8", "key_resolver": "global"}`))
	if resp, body := testcaddy.Do(t, req); resp.StatusCode != 200 {
		t.Fatalf("concurrent PUT: %d %s", resp.StatusCode, body)
	}
	edit(`{"qps": "9", "key_resolver": "global"}`, false)
	p.waitFor(10*time.Second, "stale edit refused", `(document.getElementById("edit-result") || {textContent: ""}).textContent.includes("The rule changed since you opened it")`)
	if _, body := testcaddy.Get(t, adminURL+"/sluice/rules/rate_limit/bulk_0042"); !strings.Contains(body, `"qps":"8"`) {
		t.Errorf("after a stale edit: %s, want the concurrent qps 8", body)
	}

	// A rule declared in the Caddyfile and overlaid in Redis: each field
	// says where it comes from.
	eval[bool](p, `location.hash = "#rule/gray/ui_canary", true`)
	p.waitFor(10*time.Second, "overlaid rule detail", `!!document.getElementById("detail-fields") && document.getElementById("detail-body").textContent.includes("ui_canary")`)
	if got := p.text("#detail-fields"); !strings.Contains(got, "weight25redis overlay") || !strings.Contains(got, "target_versionv2static") {
		t.Errorf("overlaid rule fields %q, want weight from the redis overlay and target_version static", got)
	}

	// The editor writes only what the user changed (a PATCH), so editing
	// one field of a Caddyfile rule puts that field alone in its overlay
	// and the rest keep following the Caddyfile.
	editJSON := func(js, button string) {
		t.Helper()
		eval[bool](p, `(() => { const e = document.getElementById("edit-fields"); const f = JSON.parse(e.value); `+js+`; e.value = JSON.stringify(f, null, 2); return true; })()`)
		p.click(`button[data-action="` + button + `"]`)
	}
	// dialogShows waits for the confirm and checks the diff it shows.
	dialogShows := func(want string, notWant ...string) {
		t.Helper()
		p.waitFor(10*time.Second, "confirm dialog with the diff", `document.getElementById("confirm").open`)
		got := p.text("#confirm-body")
		if !strings.Contains(got, want) {
			t.Errorf("confirm shows %q, want %q", got, want)
		}
		for _, nw := range notWant {
			if strings.Contains(got, nw) {
				t.Errorf("confirm shows %q, want no %q", got, nw)
			}
		}
	}
	// Clearing the overlay's one field (removing it from the JSON) unsets
	// it: no overlay is left and the declared weight is back.
	editJSON(`delete f.weight`, "apply")
	dialogShows("changed weight: 25 → 10", "target_version")
	p.confirm("Write gray rule ui_canary?")
	p.waitFor(10*time.Second, "cleared field shown as declared", `(document.getElementById("detail-fields") || {textContent: ""}).textContent.includes("weight10static")`)
	if _, body := testcaddy.Get(t, adminURL+"/sluice/rules/gray/ui_canary"); !strings.Contains(body, `"weight":"10"`) || strings.Contains(body, `"overlay"`) {
		t.Errorf("gray rule after clearing its overlaid weight: %s, want weight 10 and no overlay", body)
	}
	// One field of a Caddyfile rule edited, the others left as shown.
	eval[bool](p, `location.hash = "#rule/rate_limit/ui_limited", true`)
	p.waitFor(10*time.Second, "declared rule detail", `!!document.getElementById("edit-fields") && document.getElementById("detail-body").textContent.includes("ui_limited")`)
	// Validate (a dry run of the same PATCH) shows that one change.
	editJSON(`f.burst = "3"`, "validate")
	p.waitFor(10*time.Second, "validated", `(document.getElementById("edit-result") || {textContent: ""}).textContent.includes("Valid.")`)
	if got := p.text("#edit-result"); !strings.Contains(got, "changed burst: 2 → 3") || strings.Contains(got, "qps") {
		t.Errorf("validate shows %q, want the burst change alone", got)
	}
	// A rate limit's dry run shows the change's impact on alice's recorded
	// traffic, replayed on the one live instance.
	if got := p.text("#edit-result"); !strings.Contains(got, "Impact on the last 10m0s of traffic (1 of 1 instances answered)") ||
		!strings.Contains(got, "newly allowed") {
		t.Errorf("validate shows %q, want the impact of the change, 1 of 1 instances answered", got)
	}
	p.click(`button[data-action="apply"]`)
	dialogShows("changed burst: 2 → 3", "qps", "key_resolver")
	dialogShows("Impact on the last 10m0s of traffic (1 of 1 instances answered)")
	p.confirm("Write rate_limit rule ui_limited?")
	p.waitFor(10*time.Second, "edited field shown from the overlay", `(document.getElementById("detail-fields") || {textContent: ""}).textContent.includes("burst3redis overlay")`)
	if got := p.text("#detail-fields"); !strings.Contains(got, "qps1static") || !strings.Contains(got, "key_resolveruserIdstatic") {
		t.Errorf("declared rule fields after editing burst: %q, want qps and key_resolver static", got)
	}
	if _, body := testcaddy.Get(t, adminURL+"/sluice/rules/rate_limit/ui_limited"); !strings.Contains(body, `"burst":"3"`) ||
		!strings.Contains(body, `"overlay":{"burst":"3"}`) {
		t.Errorf("rate-limit rule after editing burst: %s, want the overlay {\"burst\":\"3\"} alone", body)
	}

	// The writes above were applied through Redis: the overview shows their
	// mean propagation delay.
	p.show("overview")
	p.waitFor(20*time.Second, "propagation delay shown", card("Propagation delay")+`.endsWith(" ms")`)

	if path := os.Getenv("SLUICE_SCREENSHOT"); path != "" {
		p.show("breakers")
		eval[bool](p, `window.scrollTo(0, 0), true`)
		png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot saved to %s", path)
	}

	var errs []string
	for _, e := range consoleErrors() {
		// The invalid and the stale edit above, refused by the dry run by design.
		if (strings.Contains(e, "400") || strings.Contains(e, "412")) && strings.Contains(e, "network") && strings.HasSuffix(e, "/sluice/rules/rate_limit/bulk_0042?dry_run=true&impact=10m)") {
			continue
		}
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	if err := tab.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
