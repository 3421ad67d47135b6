package circuitbreaker_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	_ "github.com/sluicegw/sluice/caddyfile"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// upstream is a backend the test can make succeed, fail, hang or drop.
type upstream struct {
	*httptest.Server
	hits     atomic.Int64
	inFlight atomic.Int64
	mu       sync.Mutex
	mode     string        // ok, 500, hang, slow, drop
	release  chan struct{} // closes to let hanging requests go
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{mode: "ok", release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.inFlight.Add(1)
		defer u.inFlight.Add(-1)
		mode := r.Header.Get("X-Mode")
		if mode == "" {
			u.mu.Lock()
			mode = u.mode
			u.mu.Unlock()
		}
		switch mode {
		case "500":
			http.Error(w, "upstream broke", 500)
		case "hang":
			u.mu.Lock()
			rel := u.release
			u.mu.Unlock()
			select {
			case <-rel:
				fmt.Fprint(w, "released")
			case <-r.Context().Done():
			}
		case "slow":
			time.Sleep(500 * time.Millisecond) // sleep: the slow upstream the slow-call tests need
			fmt.Fprint(w, "slow ok")
		case "drop":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			fmt.Fprint(w, "ok")
		}
	}))
	t.Cleanup(func() { u.releaseAll(); u.Close() })
	return u
}

func (u *upstream) set(mode string) {
	u.mu.Lock()
	u.mode = mode
	u.mu.Unlock()
}

func (u *upstream) releaseAll() {
	u.mu.Lock()
	close(u.release)
	u.release = make(chan struct{})
	u.mu.Unlock()
}

func (u *upstream) hostPort() string { return strings.TrimPrefix(u.URL, "http://") }

// site runs Caddy with one site on a free port: global is extra global
// options, body the site's directives. It returns the site's URL.
func site(t *testing.T, global, body string) (string, string) {
	t.Helper()
	port := testcaddy.FreePort(t)
	cf := fmt.Sprintf("{\n\t%s\n%s\n}\nhttp://127.0.0.1:%d {\n%s\n}\n", testcaddy.Options(t), global, port, body)
	testcaddy.Run(t, cf)
	return fmt.Sprintf("http://127.0.0.1:%d", port), cf
}

func get(t *testing.T, url string, headers ...string) (int, http.Header, string) {
	t.Helper()
	resp, body := testcaddy.Get(t, url, headers...)
	return resp.StatusCode, resp.Header, body
}

// expectOpen checks that a request is refused by the breaker without
// reaching the upstream.
func expectOpen(t *testing.T, u *upstream, url string, headers ...string) http.Header {
	t.Helper()
	before := u.hits.Load()
	code, hdr, body := get(t, url, headers...)
	if code != 503 {
		t.Fatalf("want the breaker's 503, got %d %q", code, body)
	}
	if n := u.hits.Load(); n != before {
		t.Fatalf("an open breaker let a request reach the upstream")
	}
	return hdr
}

func TestConsecutiveFailuresOpenAtThreshold(t *testing.T) {
	u := newUpstream(t)
	u.set("500")
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 3
		open_duration 30s
	}
	reverse_proxy %s`, u.hostPort()))
	for i := 1; i <= 3; i++ {
		if code, _, body := get(t, url); code != 500 || body != "upstream broke\n" {
			t.Fatalf("request %d: got %d %q, want the upstream's 500", i, code, body)
		}
	}
	hdr := expectOpen(t, u, url)
	if ra, _ := strconv.Atoi(hdr.Get("Retry-After")); ra < 29 || ra > 30 {
		t.Fatalf("Retry-After = %q, want about 30", hdr.Get("Retry-After"))
	}
	if u.hits.Load() != 3 {
		t.Fatalf("upstream hits = %d, want 3", u.hits.Load())
	}
}

func TestSuccessResetsConsecutiveFailures(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 3
	}
	reverse_proxy %s`, u.hostPort()))
	for range 3 {
		get(t, url, "X-Mode: 500")
		get(t, url, "X-Mode: 500")
		get(t, url) // a success breaks the run
	}
	if code, _, _ := get(t, url, "X-Mode: 500"); code != 500 {
		t.Fatalf("got %d, want the upstream's 500 (breaker should be closed)", code)
	}
}

func TestFailureRateRespectsMinRequests(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 0
		window 10
		failure_rate 50
		min_requests 6
	}
	reverse_proxy %s`, u.hostPort()))
	// 4 failures of 5 calls: 80%%, but under min_requests.
	for _, mode := range []string{"500", "500", "500", "500", "ok"} {
		get(t, url, "X-Mode: "+mode)
	}
	if code, _, _ := get(t, url); code != 200 { // sixth call: 4/6 = 66% -> trips after it
		t.Fatalf("sixth call: got %d, want 200", code)
	}
	expectOpen(t, u, url)
}

func TestFailureRateTimeWindow(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 0
		window 1m
		failure_rate 40
		min_requests 5
	}
	reverse_proxy %s`, u.hostPort()))
	for _, mode := range []string{"ok", "500", "ok", "ok"} {
		get(t, url, "X-Mode: "+mode)
	}
	get(t, url, "X-Mode: 500") // 2 of 5 = 40%
	expectOpen(t, u, url)
}

func TestSlowCallRate(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		window 4
		min_requests 4
		slow_call_duration 250ms
		slow_call_rate 50
	}
	reverse_proxy %s`, u.hostPort()))
	get(t, url, "X-Mode: slow")
	get(t, url)
	get(t, url)
	if code, _, _ := get(t, url, "X-Mode: slow"); code != 200 { // 2 of 4 slow: trips after it
		t.Fatalf("got %d, want 200", code)
	}
	expectOpen(t, u, url)
}

// trip opens a breaker with failure_threshold n by sending n failures.
func trip(t *testing.T, url string, n int, headers ...string) {
	t.Helper()
	for range n {
		get(t, url, append(headers, "X-Mode: 500")...)
	}
}

func TestHalfOpenAdmitsOnlyProbesThenCloses(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 2
		open_duration 300ms
		half_open_requests 2
		success_threshold 2
	}
	reverse_proxy %s`, u.hostPort()))
	trip(t, url, 2)
	expectOpen(t, u, url)
	u.set("hang")
	// Once the open time is over, exactly two probes reach the upstream.
	// Each attempt waits until its request is either answered (the breaker
	// is still open) or in flight at the hanging upstream (a probe).
	var probes sync.WaitGroup
	t.Cleanup(func() { u.releaseAll(); probes.Wait() })
	attempt := func() (probe bool) {
		before := u.inFlight.Load()
		answered := make(chan struct{})
		probes.Add(1)
		go func() {
			defer probes.Done()
			defer close(answered)
			if resp, err := http.Get(url); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		testcaddy.Eventually(t, 10*time.Second, "the request answered or at the upstream", func() bool {
			select {
			case <-answered:
				return true
			default:
			}
			probe = u.inFlight.Load() > before
			return probe
		})
		return probe
	}
	testcaddy.Eventually(t, 10*time.Second, "a probe admitted", attempt)
	if !attempt() {
		t.Fatal("the second request after the open time was refused, want a second probe (half_open_requests 2)")
	}
	for range 5 {
		expectOpen(t, u, url) // probe slots are taken
	}
	if n := u.inFlight.Load(); n != 2 {
		t.Fatalf("%d probes reached the upstream, want 2", n)
	}
	u.set("ok")
	u.releaseAll()
	testcaddy.Eventually(t, 5*time.Second, "probes done", func() bool { return u.inFlight.Load() == 0 })
	testcaddy.Eventually(t, 5*time.Second, "breaker closed", func() bool {
		code, _, _ := get(t, url)
		return code == 200
	})
	for range 5 {
		if code, _, _ := get(t, url); code != 200 {
			t.Fatalf("closed breaker refused: %d", code)
		}
	}
}

func TestHalfOpenFailureReopensWithLongerOpenTime(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 1
		open_duration 1s
		max_open_duration 10s
	}
	reverse_proxy %s`, u.hostPort()))
	trip(t, url, 1)
	hdr := expectOpen(t, u, url)
	if ra := hdr.Get("Retry-After"); ra != "1" {
		t.Fatalf("first trip Retry-After = %q, want 1", ra)
	}
	u.set("500")
	hits := u.hits.Load()
	testcaddy.Eventually(t, 5*time.Second, "half-open probe", func() bool {
		get(t, url)
		return u.hits.Load() > hits
	})
	// The probe failed: open again, for twice as long.
	hdr = expectOpen(t, u, url)
	if ra := hdr.Get("Retry-After"); ra != "2" {
		t.Fatalf("second trip Retry-After = %q, want 2", ra)
	}
}

func TestWhatCountsAsFailure(t *testing.T) {
	dead := testcaddy.FreePort(t) // nothing listens: dial errors
	cases := []struct {
		name, proxy string
		prep        func(u *upstream)
		headers     []string
	}{
		{name: "dial error", proxy: fmt.Sprintf("reverse_proxy 127.0.0.1:%d", dead)},
		{name: "timeout", proxy: "reverse_proxy %s {\n\t\ttransport http {\n\t\t\tresponse_header_timeout 100ms\n\t\t}\n\t}", headers: []string{"X-Mode: hang"}},
		{name: "connection closed", proxy: "reverse_proxy %s", headers: []string{"X-Mode: drop"}},
		{name: "5xx", proxy: "reverse_proxy %s", headers: []string{"X-Mode: 500"}},
		{name: "panic", proxy: "route {\n\t\tcbtest_panic\n\t}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream(t)
			proxy := c.proxy
			if strings.Contains(proxy, "%s") {
				proxy = fmt.Sprintf(proxy, u.hostPort())
			}
			url, _ := site(t, "", fmt.Sprintf(`
	route {
		circuitbreaker {
			failure_threshold 2
		}
		%s
	}`, proxy))
			for range 2 {
				req, _ := http.NewRequest("GET", url, nil)
				for _, h := range c.headers {
					k, v, _ := strings.Cut(h, ": ")
					req.Header.Set(k, v)
				}
				if resp, err := http.DefaultClient.Do(req); err == nil {
					if resp.StatusCode < 500 {
						t.Fatalf("got %d, want a failure", resp.StatusCode)
					}
					resp.Body.Close()
				}
			}
			expectOpen(t, u, url)
		})
	}
}

func TestClientCancelIsNotAFailure(t *testing.T) {
	u := newUpstream(t)
	u.set("hang")
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 3
	}
	reverse_proxy %s`, u.hostPort()))
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		go func() {
			testcaddy.Eventually(t, 5*time.Second, "request reached upstream", func() bool { return u.inFlight.Load() > 0 })
			cancel()
		}()
		if _, err := http.DefaultClient.Do(req); err == nil {
			t.Fatal("cancelled request succeeded")
		}
		testcaddy.Eventually(t, 5*time.Second, "upstream saw the cancel", func() bool { return u.inFlight.Load() == 0 })
	}
	u.set("ok")
	trip(t, url, 2) // two real failures: under the threshold of 3
	if code, _, _ := get(t, url); code != 200 {
		t.Fatalf("got %d: client cancels were counted as failures", code)
	}
}

func TestRoutesWithDifferentRulesAreIndependent(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, `
	rulestore {
		circuit_breaker a {
			failure_threshold 2
		}
		circuit_breaker b {
			failure_threshold 2
		}
	}`, fmt.Sprintf(`
	handle /a* {
		circuitbreaker a
		reverse_proxy %[1]s
	}
	handle /b* {
		circuitbreaker {
			rule b
		}
		reverse_proxy %[1]s
	}`, u.hostPort()))
	trip(t, url+"/a", 2)
	expectOpen(t, u, url+"/a")
	if code, _, _ := get(t, url+"/b"); code != 200 {
		t.Fatalf("route b got %d: a's failures leaked into b", code)
	}
	if !rulestore.Active().Breakers().IsOpen("a", "") || rulestore.Active().Breakers().IsOpen("b", "") {
		t.Fatal("IsOpen disagrees with what clients see")
	}
}

func TestPerKeyIsolation(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, `
	rulestore {
		circuit_breaker canary {
			failure_threshold 2
			key {http.request.header.X-Version}
		}
	}`, fmt.Sprintf(`
	circuitbreaker canary
	reverse_proxy %s`, u.hostPort()))
	trip(t, url, 2, "X-Version: v2")
	expectOpen(t, u, url, "X-Version: v2")
	if code, _, _ := get(t, url, "X-Version: v1"); code != 200 {
		t.Fatalf("v1 got %d: v2's breaker affected v1", code)
	}
	if code, _, _ := get(t, url); code != 200 {
		t.Fatalf("keyless request got %d", code)
	}
	if !rulestore.Active().Breakers().IsOpen("canary", "v2") || rulestore.Active().Breakers().IsOpen("canary", "v1") || rulestore.Active().Breakers().IsOpen("canary", "") {
		t.Fatal("IsOpen per key is wrong")
	}
}

// A key set by a later handler (as grayroute sets {http.vars.gray_version})
// is resolved after the call, and the outcome counts for that key.
func TestKeyResolvedAfterTheCall(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, `
	rulestore {
		circuit_breaker late {
			failure_threshold 2
			key {http.vars.version}
		}
	}`, fmt.Sprintf(`
	route {
		circuitbreaker late
		vars version {http.request.header.X-Version}
		reverse_proxy %s
	}`, u.hostPort()))
	trip(t, url, 2, "X-Version: v2")
	if !rulestore.Active().Breakers().IsOpen("late", "v2") {
		t.Fatal("v2's failures did not open v2's breaker")
	}
	if rulestore.Active().Breakers().IsOpen("late", "") || rulestore.Active().Breakers().IsOpen("late", "v1") {
		t.Fatal("v2's failures opened another breaker")
	}
	if code, _, _ := get(t, url, "X-Version: v1"); code != 200 {
		t.Fatalf("v1 got %d", code)
	}
}

func TestForcedStates(t *testing.T) {
	u := newUpstream(t)
	for _, c := range []struct {
		state    string
		wantCode int
		reaches  bool
	}{
		{"force_open", 503, false},
		{"force_closed", 500, true},
		{"disabled", 500, true},
	} {
		t.Run(c.state, func(t *testing.T) {
			url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 1
		state %s
	}
	reverse_proxy %s`, c.state, u.hostPort()))
			for range 5 {
				before := u.hits.Load()
				code, hdr, _ := get(t, url, "X-Mode: 500")
				if code != c.wantCode || (u.hits.Load() > before) != c.reaches {
					t.Fatalf("got %d (reached upstream: %v), want %d (%v)", code, u.hits.Load() > before, c.wantCode, c.reaches)
				}
				if c.state == "force_open" && hdr.Get("Retry-After") != "" {
					t.Fatalf("force_open sent Retry-After %q", hdr.Get("Retry-After"))
				}
			}
		})
	}
}

func TestOpenResponseIsConfigurable(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 1
		status 429
		body "{\"error\":\"{http.circuitbreaker.rule} is {http.circuitbreaker.state}\"}"
		header Content-Type application/json
		header X-Fallback 1
	}
	reverse_proxy %s`, u.hostPort()))
	trip(t, url, 1)
	code, hdr, body := get(t, url)
	if code != 429 || hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Fallback") != "1" || hdr.Get("Retry-After") == "" {
		t.Fatalf("got %d %v", code, hdr)
	}
	if !strings.HasPrefix(body, `{"error":"inline:`) || !strings.HasSuffix(body, ` is open"}`) {
		t.Fatalf("body = %q", body)
	}
}

func TestHandleErrorsFallback(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, `
	rulestore {
		circuit_breaker orders {
			failure_threshold 1
			handle_errors true
		}
	}`, fmt.Sprintf(`
	circuitbreaker orders
	reverse_proxy %s
	handle_errors 503 {
		respond "fallback: {http.circuitbreaker.rule} {http.circuitbreaker.state}" 200
	}`, u.hostPort()))
	trip(t, url, 1)
	before := u.hits.Load()
	code, hdr, body := get(t, url)
	if code != 200 || body != "fallback: orders open" || u.hits.Load() != before {
		t.Fatalf("got %d %q", code, body)
	}
	if hdr.Get("Retry-After") == "" {
		t.Fatal("no Retry-After with handle_errors")
	}
}

func TestReloadKeepsOpenBreakerOpen(t *testing.T) {
	u := newUpstream(t)
	url, cf := site(t, `
	rulestore {
		circuit_breaker r {
			failure_threshold 2
			open_duration 1m
		}
	}`, fmt.Sprintf(`
	circuitbreaker r
	reverse_proxy %s`, u.hostPort()))
	trip(t, url, 2)
	expectOpen(t, u, url)
	// Same rule with a changed threshold: the state is kept.
	testcaddy.Reload(t, strings.Replace(cf, "failure_threshold 2", "failure_threshold 5", 1))
	hdr := expectOpen(t, u, url)
	if ra, _ := strconv.Atoi(hdr.Get("Retry-After")); ra < 50 {
		t.Fatalf("Retry-After %q after reload: the open time restarted or was lost", hdr.Get("Retry-After"))
	}
}

func TestValidateErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"circuitbreaker {\n\t\tfailure_threshold 3\n\t\tfailure_rate 150\n\t}", "Caddyfile:7"},
		{"circuitbreaker {\n\t\tfailure_treshold 3\n\t}", "failure_treshold"},
		{"circuitbreaker {\n\t\twindow 10\n\t\tfailure_rate 50\n\t\tmin_requests 20\n\t}", "min_requests"},
		{"circuitbreaker {\n\t\tstate sometimes\n\t}", "state"},
		{"circuitbreaker {\n\t\tfailure_statuses 500-400\n\t}", "failure_statuses"},
		{"circuitbreaker nosuchrule", `no circuit_breaker rule "nosuchrule"`},
		{"circuitbreaker a b", "Caddyfile:5"},
	} {
		cf := fmt.Sprintf("{\n\tadmin off\n}\nhttp://127.0.0.1:1 {\n\t%s\n\trespond ok\n}\n", c.body)
		err := testcaddy.Validate(cf)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\ngot error %v, want it to contain %q", c.body, err, c.want)
		}
	}
	// The field's own line is named.
	err := testcaddy.Validate("{\n\tadmin off\n}\nhttp://127.0.0.1:1 {\n\tcircuitbreaker {\n\t\tfailure_threshold 3\n\t\tfailure_rate 150\n\t}\n}\n")
	if err == nil || !strings.Contains(err.Error(), "Caddyfile:7") || !strings.Contains(err.Error(), "failure_rate") {
		t.Errorf("got %v, want Caddyfile:7 and failure_rate", err)
	}
}

// panicHandler panics, standing for a buggy handler downstream.
type panicHandler struct{}

func (panicHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.cbtest_panic", New: func() caddy.Module { return panicHandler{} }}
}

func (panicHandler) ServeHTTP(http.ResponseWriter, *http.Request, caddyhttp.Handler) error {
	panic("downstream bug")
}

func init() {
	caddy.RegisterModule(panicHandler{})
	httpcaddyfile.RegisterHandlerDirective("cbtest_panic", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		h.Next()
		return panicHandler{}, nil
	})
}

func TestMetrics(t *testing.T) {
	u := newUpstream(t)
	url, cf := site(t, `
	rulestore {
		circuit_breaker m {
			failure_threshold 1
		}
	}`, fmt.Sprintf(`
	circuitbreaker m
	reverse_proxy %s`, u.hostPort()))
	var admin string
	fmt.Sscanf(cf[strings.Index(cf, "admin ")+len("admin "):], "%s", &admin)
	scrape := func(when string, want ...string) {
		t.Helper()
		_, _, body := get(t, "http://"+admin+"/metrics")
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("%s: metrics lack %s", when, w)
			}
		}
	}
	// Before any request: every series an alert tests with absent() is
	// there, at 0 (the default breaker is closed).
	scrape("after provisioning",
		`sluice_circuitbreaker_state{key="",rule="m",state="closed"} 1`,
		`sluice_circuitbreaker_state{key="",rule="m",state="open"} 0`,
		`sluice_circuitbreaker_state{key="",rule="m",state="forced_open"} 0`,
		`sluice_circuitbreaker_rejected_total{rule="m"} 0`,
		`sluice_circuitbreaker_calls_total{outcome="failure",rule="m"} 0`,
		`sluice_circuitbreaker_transitions_total{rule="m",to="open"} 0`,
	)
	trip(t, url, 1)
	expectOpen(t, u, url)
	expectOpen(t, u, url)
	scrape("tripped",
		`sluice_circuitbreaker_state{key="",rule="m",state="closed"} 0`,
		`sluice_circuitbreaker_state{key="",rule="m",state="open"} 1`,
		`sluice_circuitbreaker_state{key="",rule="m",state="forced_open"} 0`,
		`sluice_circuitbreaker_rejected_total{rule="m"} 2`,
		`sluice_circuitbreaker_transitions_total{rule="m",to="open"} 1`,
	)
}

// Two routes with the same inline fields still have separate breakers (the
// adapter names the second block inline:<hash>-2), and each keeps its own
// across a reload.
func TestIdenticalInlineRulesAreSeparate(t *testing.T) {
	u := newUpstream(t)
	url, cf := site(t, "", fmt.Sprintf(`
	handle /a* {
		circuitbreaker {
			failure_threshold 2
		}
		reverse_proxy %[1]s
	}
	handle /b* {
		circuitbreaker {
			failure_threshold 2
		}
		reverse_proxy %[1]s
	}`, u.hostPort()))
	trip(t, url+"/a", 2)
	expectOpen(t, u, url+"/a")
	if code, _, _ := get(t, url+"/b"); code != 200 {
		t.Fatalf("/b got %d: identical inline rules share a breaker", code)
	}
	testcaddy.Reload(t, cf+"\n")
	expectOpen(t, u, url+"/a")
	if code, _, _ := get(t, url+"/b"); code != 200 {
		t.Fatalf("/b got %d after reload", code)
	}
}

// A JSON config has no adapter to name its blocks: two identical inline
// breakers without an id are refused, saying what to do.
func TestIdenticalInlineBreakersWithoutIDsInJSON(t *testing.T) {
	handler := `{"handler":"circuitbreaker","inline":{"failure_threshold":2}}`
	cfg := fmt.Sprintf(`{"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:%d"],"routes":[
		{"match":[{"path":["/a"]}],"handle":[%[2]s]},{"match":[{"path":["/b"]}],"handle":[%[2]s]}]}}}}}`,
		testcaddy.FreePort(t), handler)
	err := testcaddy.ValidateJSON([]byte(cfg))
	if err == nil || !strings.Contains(err.Error(), "two inline circuit_breaker rules without an id have the same fields") {
		t.Fatalf("identical id-less inline breakers: %v, want refused", err)
	}
}

// grayroute asks IsOpen before any request went through the breaker: a
// forced-open rule is open, an unused auto rule is not.
func TestIsOpenFollowsTheRuleStore(t *testing.T) {
	site(t, `
	rulestore {
		circuit_breaker maint {
			state force_open
		}
		circuit_breaker quiet {
			failure_threshold 1
		}
	}`, "circuitbreaker /never quiet\n\trespond ok")
	if !rulestore.Active().Breakers().IsOpen("maint", "") || !rulestore.Active().Breakers().IsOpen("maint", "v2") {
		t.Fatal("a force_open rule is not open")
	}
	if rulestore.Active().Breakers().IsOpen("quiet", "") || rulestore.Active().Breakers().IsOpen("nosuch", "") {
		t.Fatal("an unused rule is open")
	}
}

// After closing, a ramp admits a share of traffic that starts at 10%.
func TestRampAfterClosing(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, "", fmt.Sprintf(`
	circuitbreaker {
		failure_threshold 1
		open_duration 200ms
		success_threshold 1
		ramp_duration 1h
		body "{http.circuitbreaker.state}"
	}
	reverse_proxy %s`, u.hostPort()))
	trip(t, url, 1)
	expectOpen(t, u, url)
	testcaddy.Eventually(t, 5*time.Second, "probe closes the breaker", func() bool {
		code, _, _ := get(t, url)
		return code == 200
	})
	admitted, ramping := 0, 0
	for range 100 {
		code, _, body := get(t, url)
		switch {
		case code == 200:
			admitted++
		case code == 503 && body == "ramping":
			ramping++
		default:
			t.Fatalf("got %d %q", code, body)
		}
	}
	// At a 10% share, 100 requests all admitted or all refused is
	// practically impossible.
	if admitted == 0 || ramping == 0 || admitted > 50 {
		t.Fatalf("ramp admitted %d of 100, refused %d", admitted, ramping)
	}
}

// Under concurrent traffic to an upstream that keeps failing, the breaker
// cycles open -> half-open -> open, and never lets more than
// half_open_requests calls reach the upstream at once after the first trip.
func TestConcurrentTrafficRespectsProbeLimit(t *testing.T) {
	var inFlight, maxInFlight, hits atomic.Int64
	var measuring atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		if measuring.Load() {
			hits.Add(1)
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
		}
		time.Sleep(20 * time.Millisecond) // sleep: the upstream's response time, so concurrent requests overlap
		http.Error(w, "down", 500)
	}))
	defer up.Close()
	url, _ := site(t, `
	rulestore {
		circuit_breaker busy {
			failure_threshold 5
			open_duration 50ms
			half_open_requests 2
		}
	}`, fmt.Sprintf(`
	circuitbreaker busy
	reverse_proxy %s`, strings.TrimPrefix(up.URL, "http://")))

	// Clients pause after the first trip: a call the breaker let through
	// while closed may still be on its way to the upstream (a busy machine
	// delays it), and would count as a probe. Once no client is inside a
	// call, every call reaching the upstream was let through after the trip.
	stop := make(chan struct{})
	var paused atomic.Bool
	var calling atomic.Int64
	resume := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if paused.Load() {
					select {
					case <-resume:
					case <-stop:
						return
					}
				}
				calling.Add(1)
				if resp, err := http.Get(url); err == nil {
					resp.Body.Close()
				}
				calling.Add(-1)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	testcaddy.Eventually(t, 10*time.Second, "first trip", func() bool {
		return rulestore.Active().Breakers().IsOpen("busy", "")
	})
	paused.Store(true)
	testcaddy.Eventually(t, 10*time.Second, "no call in progress", func() bool {
		return calling.Load() == 0 && inFlight.Load() == 0
	})
	if !rulestore.Active().Breakers().IsOpen("busy", "") {
		t.Fatal("the breaker closed again against an upstream that always fails")
	}
	measuring.Store(true)
	paused.Store(false)
	close(resume)
	testcaddy.Eventually(t, 10*time.Second, "several half-open periods", func() bool { return hits.Load() >= 20 })
	if m := maxInFlight.Load(); m > 2 {
		t.Fatalf("%d calls reached the upstream at once while not closed; half_open_requests is 2", m)
	}
}

// An outer breaker does not count an inner breaker's open response as a
// downstream failure.
func TestNestedBreakerRejectionIsNotAFailure(t *testing.T) {
	u := newUpstream(t)
	url, _ := site(t, `
	rulestore {
		circuit_breaker outer {
			failure_threshold 3
		}
		circuit_breaker inner {
			failure_threshold 1
			handle_errors true
		}
	}`, fmt.Sprintf(`
	route {
		circuitbreaker outer
		circuitbreaker inner
		reverse_proxy %s
	}`, u.hostPort()))
	trip(t, url, 1) // opens inner; one failure for outer
	for range 5 {
		expectOpen(t, u, url)
	}
	if rulestore.Active().Breakers().IsOpen("outer", "") {
		t.Fatal("the inner breaker's rejections opened the outer one")
	}
}

// A forced-open breaker is its own series, so an alert on state="open"
// (tripped by failures) does not fire for an administrator's force_open.
func TestForcedOpenIsItsOwnSeries(t *testing.T) {
	u := newUpstream(t)
	url, cf := site(t, `
	rulestore {
		circuit_breaker fo {
			failure_threshold 1
			state             force_open
		}
	}`, fmt.Sprintf(`
	circuitbreaker fo
	reverse_proxy %s`, u.hostPort()))
	if code, _, _ := get(t, url); code != http.StatusServiceUnavailable {
		t.Fatalf("force_open: got %d, want 503", code)
	}
	var admin string
	fmt.Sscanf(cf[strings.Index(cf, "admin ")+len("admin "):], "%s", &admin)
	_, _, body := get(t, "http://"+admin+"/metrics")
	for _, want := range []string{
		`sluice_circuitbreaker_state{key="",rule="fo",state="forced_open"} 1`,
		`sluice_circuitbreaker_state{key="",rule="fo",state="open"} 0`,
		`sluice_circuitbreaker_state{key="",rule="fo",state="closed"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}
