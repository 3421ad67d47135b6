package faults_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// reloadRules are static rules the reload test follows across generations.
// The quotas of the reload test: budget refills one token per 1000 s, so
// within a run it only counts down (a full refill must stay within a year:
// 30000 / 0.001 = 347 days); budget_sw is 50 × 2000 s.
var quotaLimits = map[string]int{"/budget": 30000, "/budget_sw": 100000}

const reloadRules = `rate_limit budget {
			qps          0.001
			burst        30000
			key_resolver userId
		}
		rate_limit budget_sw {
			limit_type   sliding_window
			qps          50
			window_size  2000
			key_resolver userId
		}
		circuit_breaker cb_open {
			failure_threshold 3
			open_duration     1h
		}
		circuit_breaker cb_count {
			failure_threshold 10
			open_duration     1h
		}
		rate_limit live {
			qps 1
		}`

// reloadSite uses them; generation B adds a header and a site, so the two
// configs really differ.
func reloadSite(port, portB int, gen string) string {
	s := fmt.Sprintf(`
http://127.0.0.1:%d {
	header X-Generation %s
	handle /budget {
		ratelimit budget
		respond "ok"
	}
	handle /budget_sw {
		ratelimit budget_sw
		respond "ok"
	}
	handle /cb_open/* {
		circuitbreaker cb_open
		respond /cb_open/fail 500
		respond "ok"
	}
	handle /cb_count/* {
		circuitbreaker cb_count
		respond /cb_count/fail 500
		respond "ok"
	}
	handle /live {
		ratelimit live
		respond "ok"
	}
}
`, port, gen)
	if gen == "B" {
		s += fmt.Sprintf("\nhttp://127.0.0.1:%d {\n\trespond \"only in B\"\n}\n", portB)
	}
	return s
}

// TestReloadUnderLoad reloads in-process Caddy many times in a row,
// alternating two configs, while the full chain is under load, rule updates
// arrive from Redis and a client spends two quotas request by request.
// Invariants: zero failed requests; every request of the quota clients is
// counted exactly once (X-RateLimit-Remaining goes down by exactly one per
// request across every generation: no reset, no double count); breaker
// states and failure counts kept; each Redis update applied exactly once
// (one subscription shared by overlapping generations); goroutines and
// Redis connections back to their level.
func TestReloadUnderLoad(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r.Addr)
	logPath := filepath.Join(t.TempDir(), "caddy.log")
	adminPort := testcaddy.FreePort(t)
	cfg := chainConfig{
		globals: fmt.Sprintf("admin localhost:%d\n\tpersist_config off\n\tstorage file_system %s\n\tlog {\n\t\toutput file %s\n\t\tformat json\n\t\tlevel INFO\n\t}",
			adminPort, t.TempDir(), logPath),
		redisURL: r.URL(),
		gw:       testcaddy.FreePort(t), aux: testcaddy.FreePort(t),
		v1: upstream(t, "v1"), v2: upstream(t, "v2"),
		rules: reloadRules,
	}
	site, siteB := testcaddy.FreePort(t), testcaddy.FreePort(t)
	gens := map[string]string{}
	for _, g := range []string{"A", "B"} {
		cc := cfg
		cc.extra = reloadSite(site, siteB, g)
		if g == "B" {
			cc.rules += "\n\t\trate_limit only_b {\n\t\t\tqps 3\n\t\t}"
		}
		gens[g] = cc.String()
	}
	push(t, c, "rate_limit", "probe", "qps", "100000", "burst", "100000", "key_resolver", "userId")
	testcaddy.Run(t, gens["A"])
	waitRule(t, adminPort, "rate_limit", "probe", map[string]string{"qps": "100000"})
	testcaddy.Eventually(t, 10*time.Second, "store connected", func() bool { return adminStore(t, adminPort).Connected })
	base := fmt.Sprintf("http://127.0.0.1:%d", cfg.gw)
	siteURL := fmt.Sprintf("http://127.0.0.1:%d", site)

	// Breakers before the reloads: cb_open opened, cb_count 6 failures of 10.
	for i := 0; i < 3; i++ {
		testcaddy.Get(t, siteURL+"/cb_open/fail")
	}
	if resp, _ := testcaddy.Get(t, siteURL+"/cb_open/x"); resp.StatusCode != 503 {
		t.Fatalf("cb_open: status %d before the reloads, want 503 (open)", resp.StatusCode)
	}
	for i := 0; i < 6; i++ {
		testcaddy.Get(t, siteURL+"/cb_count/fail")
	}

	rate := pick(200, 300)
	warm := startLoad(t, rate, 8, chainRequest(base))
	warm.waitSent(t, 200)
	warm.stopLoad()
	baseG := testcaddy.Settled(t, 20*time.Second, "goroutines", runtime.NumGoroutine)
	baseConns := testcaddy.Settled(t, 20*time.Second, "redis connections", func() int { return sluiceClients(t, c) })
	updatesBefore := metric(metricsText(t, adminPort), "sluice_rulestore_updates_total")

	l := startLoad(t, rate, 8, chainRequest(base))
	l.setPhase("reloading")

	// The quota clients: one request at a time, for as long as reloads run.
	stopQuota := make(chan struct{})
	var quotaWG sync.WaitGroup
	quotaSent, quotaResets := map[string]*int{}, map[string]*int{}
	for _, path := range []string{"/budget", "/budget_sw"} {
		n, resets := new(int), new(int)
		quotaSent[path], quotaResets[path] = n, resets
		quotaWG.Add(1)
		go func() {
			defer quotaWG.Done()
			quotaClient(t, siteURL+path, quotaLimits[path], n, resets, stopQuota)
		}()
	}

	// The reloads, back to back, each overlapping some traffic.
	reloads := pick(20, 200)
	reloadsDone := make(chan time.Duration)
	go func() {
		var total time.Duration
		for i := 0; i < reloads; i++ {
			g := "B"
			if i%2 == 1 {
				g = "A"
			}
			cfgJSON, err := testcaddy.Adapt(gens[g])
			if err == nil {
				start := time.Now()
				err = caddy.Load(cfgJSON, true)
				total += time.Since(start)
			}
			if err != nil {
				t.Errorf("reload %d: %v", i, err)
				break
			}
			target := l.sent() + 20
			for l.sent() < target {
				time.Sleep(2 * time.Millisecond) // sleep: polls the load's progress (no event to wait on); 20 requests overlap each reload
			}
		}
		reloadsDone <- total
	}()

	// Meanwhile, rule updates from Redis, each waited for.
	updates := 0
	var reloadTime time.Duration
loop:
	for i := 1; ; i++ {
		select {
		case reloadTime = <-reloadsDone:
			break loop
		default:
		}
		push(t, c, "rate_limit", "live", "qps", strconv.Itoa(1000+i))
		waitRule(t, adminPort, "rate_limit", "live", map[string]string{"qps": strconv.Itoa(1000 + i)})
		updates++
	}
	close(stopQuota)
	quotaWG.Wait()
	l.setPhase("after")
	l.waitSent(t, 100)
	l.stopLoad()
	// A reload closes each of the 8 load connections at most once and may
	// reset at most one replacement queued on the old listener: at most 2
	// resends per connection per reload (see doCounted).
	l.report(busyLatency, 2*8*reloads)
	for path, n := range quotaResets {
		if *n > 2*reloads {
			t.Errorf("quota client %s: %d requests resent after a reset, more than 2 per reload (%d reloads)", path, *n, reloads)
		}
	}
	t.Logf("RESULT %d reloads (alternating configs A/B), %.1f ms per reload on average; %d Redis updates during them; quota requests: %d /budget (%d resets, resent), %d /budget_sw (%d resets, resent), each counted exactly once",
		reloads, float64(reloadTime.Microseconds())/1000/float64(reloads), updates,
		*quotaSent["/budget"], *quotaResets["/budget"], *quotaSent["/budget_sw"], *quotaResets["/budget_sw"])

	// Breakers kept their state and counts.
	resp, _ := testcaddy.Get(t, siteURL+"/cb_open/x")
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != 503 || ra < 3000 {
		t.Errorf("cb_open after %d reloads: status %d Retry-After %q, want still open (503, ~3600)", reloads, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for i := 0; i < 4; i++ { // failures 7 to 10
		testcaddy.Get(t, siteURL+"/cb_count/fail")
	}
	if resp, _ := testcaddy.Get(t, siteURL+"/cb_count/x"); resp.StatusCode != 503 {
		t.Errorf("cb_count: status %d after 6+4 failures around %d reloads, want 503 (count kept, breaker open)", resp.StatusCode, reloads)
	}

	// Each update applied exactly once.
	logs, _ := os.ReadFile(logPath)
	applied := 0
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, `"rule updated"`) && strings.Contains(line, `rate_limit:rule:live"`) {
			applied++
		}
	}
	m := metricsText(t, adminPort)
	delta := metric(m, "sluice_rulestore_updates_total") - updatesBefore
	t.Logf("RESULT %d updates published, %d applied (log), updates_total +%v", updates, applied, delta)
	if applied != updates || delta != float64(updates) {
		t.Errorf("%d updates published during reloads: %d 'rule updated' log lines, updates_total +%v; want exactly %d", updates, applied, delta, updates)
	}
	// The decision metric counted every quota request once.
	if got := metric(m, `sluice_ratelimit_requests_total{result="allowed",rule="budget"}`); got != float64(*quotaSent["/budget"]) {
		t.Errorf("sluice_ratelimit_requests_total budget allowed = %v, want %d (one per request)", got, *quotaSent["/budget"])
	}

	// Nothing leaked.
	var g, conns, pooled int
	if !within(20*time.Second, func() bool {
		var ok bool
		g = runtime.NumGoroutine()
		conns, pooled, ok = redisConnsAccounted(t, c, adminPort)
		return g <= baseG+goroutineSlack && ok
	}) {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		dump := filepath.Join(os.TempDir(), "faults-reload-goroutines.txt")
		os.WriteFile(dump, buf, 0o644)
		t.Errorf("after %d reloads: goroutines=%d (baseline %d), redis connections=%d (baseline %d, held by the store's client %d); goroutines written to %s\n%s",
			reloads, g, baseG, conns, baseConns, pooled, dump, clientList(t, c))
	}
	t.Logf("RESULT after %d reloads: goroutines=%d (baseline %d), redis connections=%d (baseline %d, held by the store's client %d)", reloads, g, baseG, conns, baseConns, pooled)
}

// quotaClient sends one request at a time until stop, and checks that the
// k-th answer is 200 with X-RateLimit-Remaining = limit-k: every request
// counted once, whatever generation served it.
func quotaClient(t *testing.T, url string, limit int, sent, resets *int, stop chan struct{}) {
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for k := 1; ; k++ {
		select {
		case <-stop:
			return
		default:
		}
		// A reset before any response byte is resent and counted (see
		// doCounted); the next answer shows whether the lost attempt was
		// counted by the limiter: it must not be.
		resp, retried, err := doCounted(client, mustRequest(url, "X-User-Id: quota"))
		*resets += retried
		if err != nil {
			t.Errorf("%s request %d: %v", url, k, err)
			return
		}
		resp.Body.Close()
		*sent = k
		want := strconv.Itoa(limit - k)
		if got := resp.Header.Get("X-RateLimit-Remaining"); resp.StatusCode != 200 || got != want {
			t.Errorf("%s request %d: status %d remaining %s, want 200 remaining %s (a reload reset or double-counted the quota)",
				url, k, resp.StatusCode, got, want)
			return
		}
	}
}

// TestReloadKeepsRedisRules reloads under traffic between two configs and
// checks that a rule that exists only in Redis stays in force through every
// reload: once its one token is spent, no request may pass.
//   - "same redis settings": the configs differ elsewhere (a response
//     header); the generations share one subscription.
//   - "changed redis settings": the redis block differs in a setting that
//     does not change the data (the resync period here; a rotated password
//     or a new timeout are the same), so each reload starts a new
//     subscription.
func TestReloadKeepsRedisRules(t *testing.T) {
	t.Run("same redis settings", func(t *testing.T) { reloadKeepsRedisRules(t, "30s", "30s") })
	t.Run("changed redis settings", func(t *testing.T) { reloadKeepsRedisRules(t, "30s", "31s") })
}

func reloadKeepsRedisRules(t *testing.T, resyncA, resyncB string) {
	r := redistest.Start(t)
	c := testClient(t, r.Addr)
	adminPort, site := testcaddy.FreePort(t), testcaddy.FreePort(t)
	storage, logPath := t.TempDir(), filepath.Join(t.TempDir(), "caddy.log")
	config := func(resync, gen string) string {
		return fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	storage file_system %s
	log {
		output file %s
	}
	rulestore {
		redis %s
		resync %s
	}
}
http://127.0.0.1:%d {
	header X-Generation %s
	ratelimit strict
	respond "ok"
}
`, adminPort, storage, logPath, r.URL(), resync, site, gen)
	}
	push(t, c, "rate_limit", "strict", "qps", "0.0001", "burst", "1", "key_resolver", "global")
	testcaddy.Run(t, config(resyncA, "A"))
	waitRule(t, adminPort, "rate_limit", "strict", map[string]string{"burst": "1"})
	url := fmt.Sprintf("http://127.0.0.1:%d/", site)
	wantStatuses(t, "strict rule", statuses(t, 2, url), 200, 429)

	var passed, resent int
	var sent atomic.Int64
	var failed error
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, retried, err := doCounted(client, mustRequest(url))
			resent += retried
			if err != nil {
				failed = err
				return
			}
			resp.Body.Close()
			sent.Add(1)
			if resp.StatusCode == 200 {
				passed++
			}
		}
	}()
	reloads := pick(10, 100)
	for i := 0; i < reloads; i++ {
		if i%2 == 0 {
			testcaddy.Reload(t, config(resyncB, "B"))
		} else {
			testcaddy.Reload(t, config(resyncA, "A"))
		}
		// Let traffic meet the new generation: a few answers from it.
		target := sent.Load() + 5
		testcaddy.Eventually(t, 10*time.Second, "5 requests after the reload", func() bool {
			select {
			case <-done:
				return true // the client stopped on an error, reported below
			default:
			}
			return sent.Load() >= target
		})
	}
	close(stop)
	<-done
	if failed != nil {
		t.Fatalf("request during the reloads: %v", failed)
	}
	// At most 2 resends per reload on the client's one connection (see
	// doCounted and TestReloadUnderLoad).
	t.Logf("RESULT %d reloads: %d requests resent after a reset before any response byte", reloads, resent)
	if resent > 2*reloads {
		t.Errorf("%d requests resent during %d reloads, more than 2 per reload", resent, reloads)
	}
	t.Logf("RESULT %d reloads (resync %s/%s): %d of %d requests passed a Redis rule whose quota was spent", reloads, resyncA, resyncB, passed, sent.Load())
	if passed > 0 {
		t.Errorf("%d of %d requests passed during %d reloads: the Redis-only rule was not in force in a new generation", passed, sent.Load(), reloads)
	}
}
