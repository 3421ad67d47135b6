package examples_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestCanaryAnalysis runs examples/canary-analysis as its README does
// (upstreams.sh, the Caddyfile, rules.sh), with a 500ms analysis interval: two Caddy instances on one Redis, v1 healthy,
// v2 failing 10 % of its requests. The analysis, on the fleet's totals,
// rolls v2 back on both instances within 3 intervals of the canary reaching
// min_samples, and v2 gets no request after the rollback is published.
func TestCanaryAnalysis(t *testing.T) {
	r := redistest.Start(t)
	t.Setenv("SLUICE_REDIS", r.URL())
	v1Port, v2Port := testcaddy.FreePort(t), testcaddy.FreePort(t)
	t.Setenv("V1_ADDR", fmt.Sprintf("127.0.0.1:%d", v1Port))
	t.Setenv("V2_ADDR", fmt.Sprintf("127.0.0.1:%d", v2Port))
	v2 := startUpstreamsScript(t, v1Port, v2Port)

	raw, err := os.ReadFile("canary-analysis/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	cf := strings.Replace(string(raw), "admin localhost:{$ADMIN_PORT:2019}", "admin localhost:{{admin}}\n\tpersist_config off", 1)
	var gateways, admins []string
	var procs []*testcaddy.Process
	for i := 0; i < 2; i++ {
		port := testcaddy.FreePort(t)
		t.Setenv("GATEWAY_PORT", fmt.Sprint(port)) // read when the process starts
		p := testcaddy.Start(t, cf)
		procs = append(procs, p)
		gateways = append(gateways, fmt.Sprintf("http://localhost:%d/", port))
		admins = append(admins, fmt.Sprintf("http://localhost:%d", p.AdminPort))
	}

	cmd := exec.Command("./rules.sh")
	cmd.Dir = "canary-analysis"
	cmd.Env = append(os.Environ(), "ADMIN="+strings.TrimPrefix(admins[0], "http://"), "ANALYSIS_INTERVAL=500ms")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rules.sh: %v\n%s", err, out)
	}
	for _, a := range admins {
		testcaddy.Eventually(t, 10*time.Second, "the canary rule on "+a, func() bool {
			_, body := testcaddy.Get(t, a+"/sluice/rules/gray/checkout_canary")
			return strings.Contains(body, `"analysis":"on"`)
		})
	}

	// Users hit both instances until the test has seen the rollback on
	// both; every request remembers when it was sent and who served it.
	type sent struct {
		at      time.Time
		version string
	}
	var (
		mu      sync.Mutex
		log     []sent
		stop    atomic.Bool
		wg      sync.WaitGroup
		counter atomic.Int64
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				n := counter.Add(1)
				req, _ := http.NewRequest("GET", gateways[n%2], nil)
				req.Header.Set("X-User-Id", fmt.Sprintf("user%d", n))
				at := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				log = append(log, sent{at, resp.Header.Get("X-Served-Version")})
				mu.Unlock()
			}
		}()
	}
	rolledBack := map[string]time.Time{}
	testcaddy.Eventually(t, 120*time.Second, "the rollback on both instances", func() bool {
		for _, a := range admins {
			if _, seen := rolledBack[a]; seen {
				continue
			}
			_, body := testcaddy.Get(t, a+"/sluice/rules/gray/checkout_canary")
			if strings.Contains(body, `"state":"rolled_back"`) {
				rolledBack[a] = time.Now()
			}
		}
		return len(rolledBack) == 2
	})
	bothSeen := time.Now()
	stop.Store(true)
	wg.Wait()

	// The verdict: written once, by one instance, within 3 intervals of
	// the canary having min_samples (200) requests.
	var written []report
	for _, a := range admins {
		for _, c := range analysisOf(t, a) {
			for _, iv := range c.Intervals {
				if iv.Action == "rollback" && iv.Written {
					written = append(written, iv)
				}
			}
			if c.State != "rolled_back" {
				t.Errorf("%s: state %q in /sluice/state", a, c.State)
			}
		}
	}
	if len(written) != 1 {
		t.Fatalf("rollback written %d times, want once: %+v", len(written), written)
	}
	first := firstWithSamples(t, admins, 200)
	t.Logf("rollback verdict in interval %d, canary at %d requests from interval %d: %s",
		written[0].Interval, 200, first, written[0].Reason)
	if d := written[0].Interval - first; d < 0 || d > 3 {
		t.Fatalf("rollback %d intervals after the canary reached min_samples, want at most 3", d)
	}

	// No request sent after both instances had the rollback went to v2.
	mu.Lock()
	for _, s := range log {
		if s.at.After(bothSeen) && s.version == "v2" {
			t.Errorf("request sent at %v (rollback seen on both at %v) served by v2", s.at, bothSeen)
		}
	}
	mu.Unlock()
	before := hits(t, v2)
	for i := 0; i < 100; i++ {
		resp, _ := testcaddy.Get(t, gateways[i%2], fmt.Sprintf("X-User-Id: after%d", i))
		if resp.StatusCode != 200 || resp.Header.Get("X-Served-Version") != "v1" {
			t.Fatalf("after rollback: %d from %q", resp.StatusCode, resp.Header.Get("X-Served-Version"))
		}
	}
	if after := hits(t, v2); after != before {
		t.Fatalf("v2 answered %d requests after the rollback", after-before)
	}

	// A restarted instance (the second: GATEWAY_PORT is still its port)
	// reads the verdict from Redis and does not resume the canary.
	procs[1].Restart(cf)
	testcaddy.Eventually(t, 20*time.Second, "the restarted instance loading the rule", func() bool {
		_, body := testcaddy.Get(t, admins[1]+"/sluice/rules/gray/checkout_canary")
		return strings.Contains(body, `"state":"rolled_back"`)
	})
	for i := 0; i < 50; i++ {
		resp, _ := testcaddy.Get(t, gateways[1], fmt.Sprintf("X-User-Id: restart%d", i))
		if resp.StatusCode != 200 || resp.Header.Get("X-Served-Version") != "v1" {
			t.Fatalf("after restart: %d from %q", resp.StatusCode, resp.Header.Get("X-Served-Version"))
		}
	}
	if after := hits(t, v2); after != before {
		t.Fatalf("v2 answered %d requests after the restart", after-before)
	}
	t.Logf("v2 hits: %d in all, none after the rollback", before)
}

type report struct {
	Interval       int64  `json:"interval"`
	Action         string `json:"action"`
	Written        bool   `json:"written"`
	Reason         string `json:"reason"`
	CanaryRequests uint64 `json:"canary_requests"`
}

type canaryReport struct {
	Rule      string   `json:"rule"`
	State     string   `json:"state"`
	Intervals []report `json:"intervals"`
}

func analysisOf(t *testing.T, admin string) []canaryReport {
	t.Helper()
	_, body := testcaddy.Get(t, admin+"/sluice/state")
	var st struct {
		Grayroute struct {
			Analysis []canaryReport `json:"analysis"`
		} `json:"grayroute"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/sluice/state: %v\n%s", err, body)
	}
	return st.Grayroute.Analysis
}

// firstWithSamples is the first interval in which the fleet's canary had n
// requests, from either instance's history (both judge the same totals).
func firstWithSamples(t *testing.T, admins []string, n uint64) int64 {
	t.Helper()
	first := int64(-1)
	for _, a := range admins {
		for _, c := range analysisOf(t, a) {
			for _, iv := range c.Intervals {
				if iv.CanaryRequests >= n && (first < 0 || iv.Interval < first) {
					first = iv.Interval
				}
			}
		}
	}
	if first < 0 {
		t.Fatalf("no interval with %d canary requests in /sluice/state", n)
	}
	// The history must reach back to before the canary had n requests.
	before := false
	for _, a := range admins {
		for _, c := range analysisOf(t, a) {
			for _, iv := range c.Intervals {
				before = before || (iv.Interval < first && iv.CanaryRequests < n)
			}
		}
	}
	if !before {
		t.Fatalf("the history does not show the canary before it had %d requests", n)
	}
	return first
}

func hits(t *testing.T, upstream string) int {
	t.Helper()
	_, body := testcaddy.Get(t, upstream+"/hits")
	n, err := strconv.Atoi(strings.TrimSpace(body))
	if err != nil {
		t.Fatalf("%s/hits: %q", upstream, body)
	}
	return n
}

// startUpstreamsScript runs examples/canary-analysis/upstreams.sh as the
// README does (V1_ADDR and V2_ADDR come from the test's environment) until
// the test ends, and returns v2's URL. The script stops its two upstreams
// when it gets SIGTERM.
func startUpstreamsScript(t *testing.T, v1Port, v2Port int) string {
	t.Helper()
	cmd := exec.Command("./upstreams.sh")
	cmd.Dir = "canary-analysis"
	logPath := filepath.Join(t.TempDir(), "upstreams.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child holds its own copy
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			log, _ := os.ReadFile(logPath)
			t.Errorf("upstreams.sh did not stop on SIGTERM:\n%s", log)
		}
	})
	for _, port := range []int{v1Port, v2Port} {
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		testcaddy.Eventually(t, 60*time.Second, "upstreams.sh serving "+url, func() bool {
			resp, err := http.Get(url + "/hits")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return true
		})
	}
	return fmt.Sprintf("http://127.0.0.1:%d", v2Port)
}
