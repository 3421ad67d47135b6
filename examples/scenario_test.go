package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// scenario is one examples/<dir>/Caddyfile running in this process with its
// fixed ports moved to free ones, next to a real Redis.
type scenario struct {
	dir     string
	port    map[int]int // port in the Caddyfile -> port in the test
	gateway string      // the example's localhost:8080
	admin   string      // its admin endpoint, localhost:2019
	redis   *redistest.Server
}

var (
	fixedPort = regexp.MustCompile(`localhost:(\d{4})\b`)
	// envPort is a port the example takes from the environment, with
	// its default: localhost:{$GATEWAY_PORT:8080}.
	envPort = regexp.MustCompile(`localhost:\{\$([A-Z0-9_]+):(\d{4})\}`)
)

// startScenario reads examples/<dir>/Caddyfile, moves every localhost:NNNN to
// a free port, starts a Redis for SLUICE_REDIS (empty: the Caddyfile's rules
// are in force until rules.sh pushes others) and loads it into Caddy.
// extraPorts are ports the Caddyfile does not mention (e.g. an upstream
// program's) that the test wants mapped too.
func startScenario(t *testing.T, dir string, extraPorts ...int) *scenario {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario{dir: dir, port: map[int]int{}}
	for _, p := range extraPorts {
		s.port[p] = testcaddy.FreePort(t)
	}
	// A port from the environment is set there, to the free port its
	// default maps to (the Caddyfile is adapted in this process).
	for _, m := range envPort.FindAllStringSubmatch(string(raw), -1) {
		p, _ := strconv.Atoi(m[2])
		if _, ok := s.port[p]; !ok {
			s.port[p] = testcaddy.FreePort(t)
		}
		t.Setenv(m[1], strconv.Itoa(s.port[p]))
	}
	cf := fixedPort.ReplaceAllStringFunc(string(raw), func(m string) string {
		p, _ := strconv.Atoi(m[len("localhost:"):])
		if _, ok := s.port[p]; !ok {
			s.port[p] = testcaddy.FreePort(t)
		}
		return fmt.Sprintf("localhost:%d", s.port[p])
	})
	if !strings.Contains(cf, "\tadmin ") {
		t.Fatalf("%s/Caddyfile: no admin line", dir)
	}
	cf = strings.Replace(cf, "\tadmin ", "\tpersist_config off\n\tadmin ", 1)
	s.redis = redistest.Start(t)
	t.Setenv("SLUICE_REDIS", s.redis.URL())
	testcaddy.Run(t, cf)
	s.gateway = s.url(8080)
	s.admin = s.url(2019)
	return s
}

// url is http://localhost:<where the example's port p went>.
func (s *scenario) url(p int) string {
	if _, ok := s.port[p]; !ok {
		panic(fmt.Sprintf("port %d not in the scenario", p))
	}
	return fmt.Sprintf("http://localhost:%d", s.port[p])
}

// rulesSh runs the scenario's rules.sh against the test's Redis, as the
// README says, with REDIS_CLI_ARGS.
func (s *scenario) rulesSh(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("./rules.sh", args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("REDIS_CLI_ARGS=-p %d", s.redis.Port), "PAUSE=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s/rules.sh %v: %v\n%s", s.dir, args, err, out)
	}
}

// waitRule waits until the admin API shows rule kind/id from Redis with every
// snippet of want in its JSON.
func (s *scenario) waitRule(t *testing.T, kindID string, want ...string) {
	t.Helper()
	testcaddy.Eventually(t, 10*time.Second, kindID+" from Redis with "+strings.Join(want, " "), func() bool {
		resp, body := testcaddy.Get(t, s.admin+"/sluice/rules/"+kindID)
		if resp.StatusCode != 200 || !strings.Contains(body, `"source":"redis"`) {
			return false
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	})
}

// TestPerUserTokenBucket: examples/per-user-token-bucket.
func TestPerUserTokenBucket(t *testing.T) {
	s := startScenario(t, "per-user-token-bucket")

	// A burst of 5, then 429s (a token comes back every 0.5 s: on a very
	// slow machine the last one may pass).
	if got := codes(t, 7, s.gateway+"/orders", "X-User-Id: alice"); !strings.HasPrefix(got, "200 200 200 200 200 429") {
		t.Fatalf("alice x7 on /orders: %s, want a burst of 5 then 429s", got)
	}
	resp, body := testcaddy.Get(t, s.gateway+"/orders", "X-User-Id: bob")
	if resp.StatusCode != 200 || body != "order api: GET /orders ok" {
		t.Fatalf("bob: %d %q, want his own bucket", resp.StatusCode, body)
	}
	resp, body = testcaddy.Get(t, s.gateway+"/orders", "X-User-Id: alice")
	if resp.StatusCode != 429 || resp.Header.Get("X-RateLimit-Limit") != "5" ||
		resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"error":"rate_limited"`) {
		t.Fatalf("alice refused: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	if got := codes(t, 8, s.gateway+"/", "X-User-Id: alice"); got != strings.TrimSpace(strings.Repeat("200 ", 8)) {
		t.Fatalf("alice on / (not limited): %s", got)
	}

	s.rulesSh(t)
	s.waitRule(t, "rate_limit/orders_per_user", `"overrides":"user:vip=50/100"`)
	if got := codes(t, 5, s.gateway+"/orders", "X-User-Id: carol"); got != "200 200 200 429 429" {
		t.Fatalf("carol after rules.sh (burst 3): %s", got)
	}
	if got := codes(t, 20, s.gateway+"/orders", "X-User-Id: vip"); strings.Contains(got, "429") {
		t.Fatalf("vip after rules.sh (burst 100): %s", got)
	}
}

// TestSlidingWindowIP: examples/sliding-window-ip.
func TestSlidingWindowIP(t *testing.T) {
	s := startScenario(t, "sliding-window-ip")

	var got []string
	for i := 1; i <= 11; i++ {
		resp, _ := testcaddy.Get(t, s.gateway+"/", fmt.Sprintf("X-User-Id: u%d", i))
		got = append(got, fmt.Sprint(resp.StatusCode))
	}
	if want := strings.Repeat("200 ", 10) + "429"; strings.Join(got, " ") != want {
		t.Fatalf("11 users from one IP: %s, want %s", strings.Join(got, " "), want)
	}
	resp, body := testcaddy.Get(t, s.gateway+"/")
	if resp.StatusCode != 429 || resp.Header.Get("X-RateLimit-Limit") != "10" ||
		!regexp.MustCompile(`^Too many requests from ip:127\.0\.0\.1: retry in \d+s$`).MatchString(body) {
		t.Fatalf("refusal: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	// A spoofed X-Forwarded-For from an untrusted peer changes nothing.
	if resp, _ := testcaddy.Get(t, s.gateway+"/", "X-Forwarded-For: 203.0.113.9"); resp.StatusCode != 429 {
		t.Fatalf("spoofed X-Forwarded-For got %d, want 429", resp.StatusCode)
	}

	s.rulesSh(t)
	s.waitRule(t, "rate_limit/per_ip", `"qps":"3"`)
	resp, body = testcaddy.Get(t, s.gateway+"/")
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "30" || body != "hello 127.0.0.1" {
		t.Fatalf("after rules.sh: %d %q %v, want 200 under 30 per 10s", resp.StatusCode, body, resp.Header)
	}
}

// TestInflightCap: examples/inflight-cap, in front of examples/upstream.
func TestInflightCap(t *testing.T) {
	s := startScenario(t, "inflight-cap")
	// The README's -delay 2s would race the test; a long delay and requests
	// the test cancels itself keep it deterministic.
	startUpstream(t, s.port[9001], "-delay", "1m")

	// slow starts a request to /slow as user that stays in flight until
	// the returned cancel is called.
	slow := func(user string) (cancel func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", s.gateway+"/slow", nil)
		req.Header.Set("X-User-Id", user)
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		return cancel
	}
	inFlight := func(n int) {
		t.Helper()
		testcaddy.Eventually(t, 10*time.Second, fmt.Sprintf("%d requests in flight", n), func() bool {
			_, body := testcaddy.Get(t, s.admin+"/metrics")
			return strings.Contains(body, fmt.Sprintf(`sluice_ratelimit_in_flight{rule="slow_report"} %d`, n))
		})
	}

	var cancels []func()
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	cancels = append(cancels, slow("alice"))
	inFlight(1)
	resp, body := testcaddy.Get(t, s.gateway+"/slow", "X-User-Id: alice")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "too_many_in_flight") {
		t.Fatalf("alice's second request: %d %q, want 503 too_many_in_flight at once", resp.StatusCode, body)
	}
	for _, u := range []string{"bob", "carol"} {
		cancels = append(cancels, slow(u))
	}
	inFlight(3)
	if resp, _ := testcaddy.Get(t, s.gateway+"/slow", "X-User-Id: dave"); resp.StatusCode != 503 {
		t.Fatalf("dave with 3 in flight: %d, want 503", resp.StatusCode)
	}
	// Requests finishing (here: the clients going away) free their slots.
	for _, c := range cancels {
		c()
	}
	inFlight(0)
	if resp, body := testcaddy.Get(t, s.gateway+"/slow?d=1ms", "X-User-Id: dave"); resp.StatusCode != 200 || !strings.HasPrefix(body, "v1 ") {
		t.Fatalf("dave after the others left: %d %q", resp.StatusCode, body)
	}

	s.rulesSh(t)
	s.waitRule(t, "rate_limit/slow_report", `"max_concurrent":"2"`)
	cancels = append(cancels, slow("erin"))
	inFlight(1)
	if resp, _ := testcaddy.Get(t, s.gateway+"/slow?d=1ms", "X-User-Id: erin"); resp.StatusCode != 200 {
		t.Fatalf("erin's second request after rules.sh (2 per user): %d, want 200", resp.StatusCode)
	}
}

// TestBreakerFallback: examples/breaker-fallback.
func TestBreakerFallback(t *testing.T) {
	s := startScenario(t, "breaker-fallback")
	const real, cached = "inventory: 42 in stock", "inventory (cached): in stock"

	if _, body := testcaddy.Get(t, s.gateway+"/"); body != real {
		t.Fatalf("GET / = %q, want %q", body, real)
	}
	if got := codes(t, 3, s.gateway+"/flaky"); got != "500 500 500" {
		t.Fatalf("/flaky x3: %s", got)
	}
	resp, body := testcaddy.Get(t, s.gateway+"/")
	if resp.StatusCode != 200 || body != cached || resp.Header.Get("X-Fallback") != "breaker inventory is open" ||
		resp.Header.Get("Retry-After") == "" {
		t.Fatalf("open breaker: %d %q %v, want the fallback", resp.StatusCode, body, resp.Header)
	}
	// Fast fail: even /flaky gets the fallback, the service is not called.
	if _, body := testcaddy.Get(t, s.gateway+"/flaky"); body != cached {
		t.Fatalf("/flaky while open: %q", body)
	}
	// After the open time, probes go through and two successes close it.
	testcaddy.Eventually(t, 15*time.Second, "the breaker to let a probe through", func() bool {
		_, body := testcaddy.Get(t, s.gateway+"/")
		return body == real
	})
	if _, body := testcaddy.Get(t, s.gateway+"/"); body != real {
		t.Fatalf("second probe: %q", body)
	}
	if _, body := testcaddy.Get(t, s.gateway+"/"); body != real {
		t.Fatalf("closed again: %q", body)
	}

	s.rulesSh(t, "force_open")
	s.waitRule(t, "circuit_breaker/inventory", `"state":"force_open"`)
	resp, body = testcaddy.Get(t, s.gateway+"/")
	if body != cached || resp.Header.Get("X-Fallback") != "breaker inventory is forced_open" {
		t.Fatalf("forced open: %q %v", body, resp.Header)
	}
	s.rulesSh(t, "auto")
	s.waitRule(t, "circuit_breaker/inventory", `"state":"auto"`)
	if _, body := testcaddy.Get(t, s.gateway+"/"); body != real {
		t.Fatalf("back to auto: %q", body)
	}
}

// TestHeaderCanary: examples/header-canary.
func TestHeaderCanary(t *testing.T) {
	s := startScenario(t, "header-canary")
	const v1, v2 = "checkout v1 (asked for v1)", "checkout v2 (asked for v2)"
	for _, c := range []struct {
		url, header, want string
	}{
		{"/", "", v1},
		{"/", "X-Canary: true", v2},
		{"/?X-Canary=true", "", v2},
		{"/", "Cookie: X-Canary=true", v2},
		{"/", "X-Canary: false", v1},
		{"/", "X-Target-Version: v2", v1},
	} {
		var headers []string
		if c.header != "" {
			headers = append(headers, c.header)
		}
		resp, body := testcaddy.Get(t, s.gateway+c.url, headers...)
		if body != c.want || resp.Header.Get("X-Served-Version") != c.want[9:11] {
			t.Errorf("GET %s %s = %q (X-Served-Version %q), want %q", c.url, c.header, body, resp.Header.Get("X-Served-Version"), c.want)
		}
	}

	s.rulesSh(t)
	s.waitRule(t, "gray/checkout_canary", `"match_tag":"X-Group"`)
	for header, want := range map[string]string{"X-Group: beta": v2, "X-Group: staff": v2, "X-Group: ops": v1, "X-Canary: true": v1} {
		if _, body := testcaddy.Get(t, s.gateway+"/", header); body != want {
			t.Errorf("after rules.sh, %s: %q, want %q", header, body, want)
		}
	}
}

// TestWeightedRamp: examples/weighted-ramp, stepped with its rules.sh.
func TestWeightedRamp(t *testing.T) {
	s := startScenario(t, "weighted-ramp")
	const users = 100
	onV2 := func() map[int]bool {
		t.Helper()
		got := map[int]bool{}
		for u := 0; u < users; u++ {
			resp, body := testcaddy.Get(t, s.gateway+"/", fmt.Sprintf("X-User-Id: user%d", u))
			if body != "search "+resp.Header.Get("X-Served-Version") {
				t.Fatalf("user%d: %q with X-Served-Version %q", u, body, resp.Header.Get("X-Served-Version"))
			}
			if body == "search v2" {
				got[u] = true
			}
		}
		return got
	}
	step := func(weight string) map[int]bool {
		t.Helper()
		s.rulesSh(t, weight)
		s.waitRule(t, "gray/search_ramp", `"weight":"`+weight+`"`)
		return onV2()
	}

	if n := len(onV2()); n != 0 {
		t.Fatalf("weight 0 in the Caddyfile: %d of %d users on v2", n, users)
	}
	at10 := step("10")
	at50 := step("50")
	// A stable hash: about the weight's share, and nobody moves back.
	if n := len(at10); n < users*3/100 || n > users*20/100 {
		t.Errorf("weight 10: %d of %d users on v2", n, users)
	}
	if n := len(at50); n < users*35/100 || n > users*65/100 {
		t.Errorf("weight 50: %d of %d users on v2", n, users)
	}
	for u := range at10 {
		if !at50[u] {
			t.Errorf("user%d was on v2 at 10%% and back on v1 at 50%%", u)
		}
	}
	if again := onV2(); len(again) != len(at50) {
		t.Errorf("weight 50 asked twice: %d then %d users on v2", len(at50), len(again))
	}
	if n := len(step("100")); n != users {
		t.Errorf("weight 100: %d of %d users on v2", n, users)
	}
	if n := len(step("0")); n != 0 {
		t.Errorf("rolled back to 0: %d users still on v2", n)
	}
}

// TestFullChain: examples/full-chain as its README runs it, on the stand-in
// upstreams.
func TestFullChain(t *testing.T) {
	s := startScenario(t, "full-chain")

	resp, body := testcaddy.Get(t, s.gateway+"/")
	if resp.StatusCode != 200 || body != "v1 (stand-in)" || resp.Header.Get("X-Served-Version") != "v1" ||
		resp.Header.Get("X-RateLimit-Limit") != "10" {
		t.Fatalf("GET / = %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if _, body := testcaddy.Get(t, s.gateway+"/", "X-Canary: true"); body != "v2 (stand-in)" {
		t.Fatalf("canary: %q", body)
	}
	if got := codes(t, 12, s.gateway+"/", "X-User-Id: alice"); !strings.HasPrefix(got, strings.Repeat("200 ", 10)) || !strings.Contains(got, "429") {
		t.Fatalf("alice x12: %s, want 10 then 429s", got)
	}
	if got := codes(t, 5, s.gateway+"/fail", "X-User-Id: tester"); got != "500 500 500 503 503" {
		t.Fatalf("/fail x5: %s", got)
	}

	// 5 s later probes go through; two successes close it.
	probe := 0
	testcaddy.Eventually(t, 15*time.Second, "the breaker to let a probe through", func() bool {
		probe++
		_, body := testcaddy.Get(t, s.gateway+"/", fmt.Sprintf("X-User-Id: prober%d", probe))
		return body == "v1 (stand-in)"
	})
	if got := codes(t, 3, s.gateway+"/", "X-User-Id: carol"); got != "200 200 200" {
		t.Fatalf("after recovery: %s", got)
	}

	s.rulesSh(t)
	s.waitRule(t, "rate_limit/order_api", `"burst":"3"`)
	s.waitRule(t, "gray/order_ramp", `"weight":"50"`)
	if got := codes(t, 4, s.gateway+"/", "X-User-Id: bob"); got != "200 200 200 429" {
		t.Fatalf("bob x4 after rules.sh (bursts of 3): %s", got)
	}
	v2 := 0
	for u := 0; u < 100; u++ {
		_, body := testcaddy.Get(t, s.gateway+"/", fmt.Sprintf("X-User-Id: ramp%d", u))
		if body == "v2 (stand-in)" {
			v2++
		}
	}
	if v2 < 30 || v2 > 70 {
		t.Fatalf("weight 50: %d of 100 users on v2", v2)
	}
}

// TestFullChainWithUpstreams runs examples/full-chain the way scripts/demo.sh
// does: addresses from the environment, two examples/upstream programs as v1
// and v2, v1 made to fail and to recover while it runs.
func TestFullChainWithUpstreams(t *testing.T) {
	env := map[string]int{}
	for _, v := range []string{"SLUICE_ADMIN", "SLUICE_GATEWAY", "SLUICE_V1", "SLUICE_V2", "SLUICE_STANDIN_V1", "SLUICE_STANDIN_V2"} {
		env[v] = testcaddy.FreePort(t)
		t.Setenv(v, fmt.Sprintf("127.0.0.1:%d", env[v]))
	}
	v1 := startUpstream(t, env["SLUICE_V1"], "-version", "v1")
	startUpstream(t, env["SLUICE_V2"], "-version", "v2")
	s := startScenario(t, "full-chain") // its defaults move to free ports too, unused
	s.gateway = fmt.Sprintf("http://127.0.0.1:%d", env["SLUICE_GATEWAY"])
	s.admin = fmt.Sprintf("http://127.0.0.1:%d", env["SLUICE_ADMIN"])

	_, body := testcaddy.Get(t, s.gateway+"/")
	if want := fmt.Sprintf("v1 (upstream 127.0.0.1:%d) target=v1\n", env["SLUICE_V1"]); body != want {
		t.Fatalf("GET / = %q, want %q", body, want)
	}
	if _, body := testcaddy.Get(t, s.gateway+"/", "X-Canary: true"); !strings.HasPrefix(body, "v2 ") {
		t.Fatalf("canary: %q", body)
	}
	if resp, _ := testcaddy.Get(t, s.admin+"/sluice/store"); resp.StatusCode != 200 {
		t.Fatalf("admin API on SLUICE_ADMIN: %d", resp.StatusCode)
	}

	// v1 starts failing: three 500s open the breaker, then it fails fast.
	setFailRate := func(v string) {
		t.Helper()
		resp, err := http.Post(v1+"/fail-rate?value="+v, "", nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("set v1 fail-rate %s: %v %v", v, resp, err)
		}
		resp.Body.Close()
	}
	setFailRate("1")
	if got := codes(t, 5, s.gateway+"/", "X-User-Id: tester"); got != "500 500 500 503 503" {
		t.Fatalf("v1 failing: %s", got)
	}
	resp, _ := testcaddy.Get(t, s.gateway+"/", "X-User-Id: tester2")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("open breaker: %d %v", resp.StatusCode, resp.Header)
	}
	// v1 recovers: after the open time two probes close the breaker.
	setFailRate("0")
	probe := 0
	testcaddy.Eventually(t, 15*time.Second, "the breaker to let a probe through", func() bool {
		probe++
		resp, _ := testcaddy.Get(t, s.gateway+"/", fmt.Sprintf("X-User-Id: prober%d", probe))
		return resp.StatusCode == 200
	})
	if got := codes(t, 3, s.gateway+"/", "X-User-Id: carol"); got != "200 200 200" {
		t.Fatalf("after recovery: %s", got)
	}
}

// TestScenarioFiles: every scenario has its Caddyfile (formatted as `caddy
// fmt` wants it, so Caddy does not warn), an executable rules.sh and a README.
func TestScenarioFiles(t *testing.T) {
	dirs, _ := filepath.Glob("*/Caddyfile")
	if len(dirs) < 8 {
		t.Fatalf("found %d scenario Caddyfiles, want 8: %v", len(dirs), dirs)
	}
	for _, cf := range dirs {
		dir := filepath.Dir(cf)
		raw, err := os.ReadFile(cf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(caddyfile.Format(raw), raw) {
			t.Errorf("%s is not formatted: run bin/caddy fmt --overwrite %s", cf, cf)
		}
		if fi, err := os.Stat(filepath.Join(dir, "rules.sh")); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s/rules.sh missing or not executable (%v)", dir, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
}
