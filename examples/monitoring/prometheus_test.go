package monitoring_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// stack is a real Caddy with the three handlers, on a real Redis, and a
// real Prometheus scraping Caddy's admin /metrics every second and
// evaluating rules.yml, its windows and durations shortened to seconds.
type stack struct {
	redis   *redistest.Server
	gateway string // http://localhost:<port>
	admin   string
	prom    string
}

// stackCaddyfile serves one route per handler: /quota (a scope cluster
// rate limit, on_redis_error local), /tight (1 request a second), /flaky
// (a breaker over a 500 upstream, open for an hour once tripped) and
// /canary (a canary under analysis that needs more samples than the test
// sends, so only the test's commands change its state); /chain runs all
// three handlers.
const stackCaddyfile = `{
	admin localhost:%[1]d
	persist_config off
	storage file_system %[2]s
	rulestore {
		redis %[3]s
		rate_limit cluster_quota {
			qps 10000
			burst 10000
			key_resolver global
			scope cluster
			on_redis_error local
		}
		rate_limit roomy {
			qps 1000
			burst 1000
			key_resolver userId
		}
		rate_limit tight {
			qps 1
			burst 1
			key_resolver global
		}
		circuit_breaker flaky_cb {
			failure_threshold 2
			open_duration 1h
		}
		circuit_breaker chain_cb {
			failure_threshold 5
		}
		gray checkout {
			target_version v2
			fallback_version v1
			hash_key userId
			analysis on
			analysis_interval 1s
			step_weight 10
			min_samples 1000000000
		}
	}
}
http://localhost:%[4]d {
	%[5]s
	route /quota {
		ratelimit cluster_quota
		respond "ok"
	}
	route /tight {
		ratelimit tight
		respond "ok"
	}
	route /flaky {
		circuitbreaker flaky_cb
		respond "boom" 500
	}
	route /canary {
		grayroute checkout
		respond "{http.grayroute.version}"
	}
	route /chain {
		ratelimit roomy
		circuitbreaker chain_cb
		grayroute checkout
		respond "{http.grayroute.version}"
	}
}
`

// startCaddy runs stackCaddyfile in this process on a fresh Redis, with
// extra lines at the top of the site block.
func startCaddy(t *testing.T, site string) *stack {
	t.Helper()
	s := &stack{redis: redistest.Start(t)}
	admin, gw := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(stackCaddyfile, admin, t.TempDir(), s.redis.URL(), gw, site))
	s.gateway = fmt.Sprintf("http://localhost:%d", gw)
	s.admin = fmt.Sprintf("http://localhost:%d", admin)
	return s
}

var (
	longWindow = regexp.MustCompile(`\[\d+m\]`)
	longFor    = regexp.MustCompile(`(?m)^(\s+for: )\d+m$`)
)

// startPrometheus runs Debian's prometheus on a free loopback port,
// scraping the admin endpoint every second, with rules.yml time-scaled:
// every [Nm] window becomes [5s] and every `for: Nm` becomes `for: 3s`.
func (s *stack) startPrometheus(t *testing.T) {
	t.Helper()
	bin := tool(t, "prometheus")
	dir := t.TempDir()
	rules := longWindow.ReplaceAllString(readFile(t, "rules.yml"), "[5s]")
	rules = longFor.ReplaceAllString(rules, "${1}3s")
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: caddy
    static_configs:
      - targets: ['%s']
`, strings.TrimPrefix(s.admin, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := testcaddy.FreePort(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", out.String())
		}
	})
	s.prom = fmt.Sprintf("http://127.0.0.1:%d", port)
	testcaddy.Eventually(t, 60*time.Second, "prometheus to scrape Caddy", func() bool {
		var r struct {
			Data struct {
				ActiveTargets []struct{ Health string } `json:"activeTargets"`
			} `json:"data"`
		}
		return s.promGet(&r, "/api/v1/targets") && len(r.Data.ActiveTargets) == 1 && r.Data.ActiveTargets[0].Health == "up"
	})
}

// promGet decodes a Prometheus API answer; false while it does not answer.
func (s *stack) promGet(v any, path string) bool {
	resp, err := http.Get(s.prom + path)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(v) == nil
}

type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// firing lists the firing alerts named name.
func (s *stack) firing(t *testing.T, name string) []alert {
	t.Helper()
	var r struct {
		Data struct{ Alerts []alert } `json:"data"`
	}
	if !s.promGet(&r, "/api/v1/alerts") {
		t.Fatal("prometheus /api/v1/alerts does not answer")
	}
	var out []alert
	for _, a := range r.Data.Alerts {
		if a.Labels["alertname"] == name && a.State == "firing" {
			out = append(out, a)
		}
	}
	return out
}

// waitFiring waits until alert name fires with every label of want.
func (s *stack) waitFiring(t *testing.T, name string, want map[string]string) {
	t.Helper()
	testcaddy.Eventually(t, 60*time.Second, name+" firing with "+fmt.Sprint(want), func() bool {
	next:
		for _, a := range s.firing(t, name) {
			for k, v := range want {
				if a.Labels[k] != v {
					continue next
				}
			}
			return true
		}
		return false
	})
}

// waitCleared waits until no alert name is firing or pending.
func (s *stack) waitCleared(t *testing.T, name string) {
	t.Helper()
	testcaddy.Eventually(t, 60*time.Second, name+" to clear", func() bool {
		var r struct {
			Data struct{ Alerts []alert } `json:"data"`
		}
		if !s.promGet(&r, "/api/v1/alerts") {
			return false
		}
		for _, a := range r.Data.Alerts {
			if a.Labels["alertname"] == name {
				return false
			}
		}
		return true
	})
}

// post sends an admin API POST and fails the test unless it answers 200.
func post(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
}

// load sends a request to path every interval until the test ends.
func (s *stack) load(t *testing.T, path string, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if resp, err := c.Get(s.gateway + path); err == nil {
				resp.Body.Close()
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// TestAlertsOnRealPrometheus drives each condition rules.yml alerts on
// against real Caddy and Redis, and checks through Prometheus's API that
// the alert fires, then clears once the condition is gone.
func TestAlertsOnRealPrometheus(t *testing.T) {
	s := startCaddy(t, "")
	// Traffic before Prometheus starts, so every series exists.
	for _, p := range []string{"/quota", "/tight", "/canary"} {
		testcaddy.Get(t, s.gateway+p, "X-User-Id: alice")
	}
	testcaddy.Eventually(t, 10*time.Second, "the canary under analysis", func() bool {
		_, body := testcaddy.Get(t, s.admin+"/metrics")
		return strings.Contains(body, `sluice_grayroute_canary_state{rule="checkout",state="running"} 1`)
	})
	s.startPrometheus(t)
	quota := s.load(t, "/quota", 50*time.Millisecond)
	defer quota()

	// Every rule evaluates without error.
	testcaddy.Eventually(t, 30*time.Second, "every rule evaluated, healthy", func() bool {
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name, Health, LastError string
					}
				}
			}
		}
		if !s.promGet(&r, "/api/v1/rules") {
			return false
		}
		n := 0
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				if rule.Health != "ok" {
					return false
				}
				n++
			}
		}
		return n == 12
	})
	for _, name := range alertNames(t) {
		if got := s.firing(t, name); len(got) != 0 {
			t.Fatalf("%s fires before anything happened: %v", name, got)
		}
	}

	t.Run("breaker open", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			testcaddy.Get(t, s.gateway+"/flaky")
		}
		if resp, _ := testcaddy.Get(t, s.gateway+"/flaky"); resp.StatusCode != 503 {
			t.Fatalf("the breaker did not open: %d", resp.StatusCode)
		}
		s.waitFiring(t, "SluiceBreakerOpen", map[string]string{"rule": "flaky_cb", "severity": "page"})
		post(t, s.admin+"/sluice/breakers/flaky_cb/reset")
		s.waitCleared(t, "SluiceBreakerOpen")
	})

	t.Run("bad rule", func(t *testing.T) {
		c := s.redis.Client()
		redistest.Push(t, c, "rate_limit:rule:tight", "gateway:rules:rate_limit", "tight", "qps", "lots")
		s.waitFiring(t, "SluiceRuleInvalid", map[string]string{"kind": "rate_limit"})
		if err := c.Del(t.Context(), "rate_limit:rule:tight").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Publish(t.Context(), "gateway:rules:rate_limit", "tight").Err(); err != nil {
			t.Fatal(err)
		}
		s.waitCleared(t, "SluiceRuleInvalid")
	})

	t.Run("canary rolled back", func(t *testing.T) {
		post(t, s.admin+"/sluice/canary/checkout/rollback")
		s.waitFiring(t, "SluiceCanaryRolledBack", map[string]string{"rule": "checkout"})
		post(t, s.admin+"/sluice/canary/checkout/resume")
		s.waitCleared(t, "SluiceCanaryRolledBack")
	})

	t.Run("refusals", func(t *testing.T) {
		stop := s.load(t, "/tight", 50*time.Millisecond) // 20 req/s against 1 req/s
		s.waitFiring(t, "SluiceRateLimitRefusing", map[string]string{"rule": "tight"})
		stop()
		s.waitCleared(t, "SluiceRateLimitRefusing")
	})

	t.Run("redis down", func(t *testing.T) {
		s.redis.Kill()
		s.waitFiring(t, "SluiceRedisDisconnected", nil)
		s.waitFiring(t, "SluiceClusterLimitDegraded", map[string]string{"rule": "cluster_quota", "mode": "local"})
		s.redis.Restart()
		s.waitCleared(t, "SluiceRedisDisconnected")
		s.waitCleared(t, "SluiceClusterLimitDegraded")
	})

	for _, name := range alertNames(t) {
		if got := s.firing(t, name); len(got) != 0 {
			t.Errorf("%s still fires at the end: %v", name, got)
		}
	}
}

// syncBuffer is a bytes buffer two goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
