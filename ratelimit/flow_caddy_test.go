package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// flowOf reads a rule's flow section from GET /sluice/state.
func flowOf(t *testing.T, adminPort int, rule string) (inFlight int64, flow map[string]any) {
	t.Helper()
	_, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/state", adminPort))
	var st struct {
		Ratelimit struct {
			Rules []struct {
				Rule     string         `json:"rule"`
				InFlight int64          `json:"in_flight"`
				Flow     map[string]any `json:"flow"`
			} `json:"rules"`
		} `json:"ratelimit"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("state: %v\n%s", err, body)
	}
	for _, r := range st.Ratelimit.Rules {
		if r.Rule == rule {
			return r.InFlight, r.Flow
		}
	}
	return -1, nil
}

// A paced rule: a burst is spread out (later requests wait for their slot,
// {http.ratelimit.queue_wait} says how long) and what lies beyond
// max_queue_wait is refused with Retry-After.
func TestPaceSpreadsABurstAndRefusesBeyondMaxQueueWait(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 10
		key_resolver global
		control_behavior pace
		max_queue_wait 250ms
	}
	respond "{http.ratelimit.queue_wait}"`)
	testcaddy.Run(t, s.cfg)

	// 8 at once, 100 ms apart: slots 0..250 ms fit (3 or 4 of them,
	// depending on how spread out the 8 arrive), the rest are refused.
	type result struct {
		code  int
		retry string
		wait  time.Duration
	}
	res := make([]result, 8)
	var wg sync.WaitGroup
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := testcaddy.Get(t, s.urls[0])
			res[i].code, res[i].retry = resp.StatusCode, resp.Header.Get("Retry-After")
			res[i].wait, _ = time.ParseDuration(body)
		}()
	}
	wg.Wait()
	admitted, waited := 0, 0
	for _, r := range res {
		switch r.code {
		case 200:
			admitted++
			if r.wait > 0 {
				waited++
			}
		case 429:
			if n, err := strconv.Atoi(r.retry); err != nil || n < 1 {
				t.Errorf("refused without Retry-After: %+v", r)
			}
		default:
			t.Errorf("status %d", r.code)
		}
	}
	// Slots 0, 100 and 200 ms are within 250 ms of any arrival in the
	// burst; more fit only if the 8 arrive spread over > 50 ms.
	if admitted < 3 || admitted > 6 || waited < admitted-1 {
		t.Fatalf("admitted %d (waited %d) of 8: %+v", admitted, waited, res)
	}
	m := metrics(t, s.adminPort)
	if n := metricValue(m, `sluice_ratelimit_queue_wait_seconds_count{rule="inline:`); n != float64(waited) {
		t.Errorf("queue wait histogram count %v, want %d\n%s", n, waited, grep(m, "queue_wait"))
	}
}

// A waiting request holds its in-flight slot, and gives it and its queue
// place back when its client goes away.
func TestPacedWaiterCountsInFlightAndHonoursCancel(t *testing.T) {
	s := caddyfile(t, `	rulestore {
		rate_limit slow {
			qps 0.2
			key_resolver global
			control_behavior pace
			max_queue_wait 10s
			max_concurrent_total 1
			concurrency_status 503
		}
	}`, "ratelimit slow\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200}) // takes the slot now; the next is 5 s away

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.urls[0], nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			err = fmt.Errorf("answered %d", resp.StatusCode)
		}
		gone <- err
	}()
	testcaddy.Eventually(t, 10*time.Second, "one request waiting, holding the in-flight slot", func() bool {
		n, fl := flowOf(t, s.adminPort, "slow")
		return n == 1 && fl != nil && fl["queued"] == 1.0
	})
	// The waiter holds max_concurrent_total's only slot: refused at once.
	resp, _ := testcaddy.Get(t, s.urls[0])
	if resp.StatusCode != 503 {
		t.Fatalf("while one waits: %d, want 503 (in-flight cap)", resp.StatusCode)
	}
	cancel()
	if err := <-gone; err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("cancelled client: %v", err)
	}
	testcaddy.Eventually(t, 10*time.Second, "slot and queue place given back", func() bool {
		n, fl := flowOf(t, s.adminPort, "slow")
		return n == 0 && fl != nil && fl["queued"] == 0.0
	})
}

// max_concurrent adaptive in Caddy: the state shows the limit and the
// minRTT once measured; an upstream answering 5xx drives the limit down to
// min_limit.
func TestAdaptiveLimitInCaddy(t *testing.T) {
	fail := make(chan struct{})
	up := newSlowUpstream(t)
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-fail:
			w.WriteHeader(500)
		default:
			time.Sleep(2 * time.Millisecond) // sleep: a latency to measure
		}
	})
	s := caddyfile(t, `	rulestore {
		rate_limit adapt {
			qps 100000
			key_resolver global
			max_concurrent adaptive
			min_limit 2
			initial_limit 10
			sample_window 50ms
		}
	}`, fmt.Sprintf("ratelimit adapt\n\treverse_proxy %s", hostPort(up)))
	testcaddy.Run(t, s.cfg)
	testcaddy.Eventually(t, 20*time.Second, "minRTT measured", func() bool {
		status(t, s.urls[0]) // the first probe takes 50 answers after its first round
		_, fl := flowOf(t, s.adminPort, "adapt")
		a, _ := fl["adaptive"].(map[string]any)
		return a != nil && a["probing"] == false && a["min_rtt"].(float64) >= 0.002 && a["limit"].(float64) >= 2
	})
	m := metrics(t, s.adminPort)
	if v := metricValue(m, `sluice_ratelimit_min_rtt_seconds{rule="adapt"}`); v < 0.002 {
		t.Errorf("min_rtt gauge %v\n%s", v, grep(m, "adapt"))
	}
	close(fail)
	testcaddy.Eventually(t, 20*time.Second, "limit backed off to min_limit under 5xx", func() bool {
		status(t, s.urls[0])
		_, fl := flowOf(t, s.adminPort, "adapt")
		a, _ := fl["adaptive"].(map[string]any)
		return a != nil && a["limit"] == 2.0
	})
	if v := metricValue(metrics(t, s.adminPort), `sluice_ratelimit_concurrency_limit{rule="adapt"}`); v != 2 {
		t.Errorf("concurrency_limit gauge %v, want 2", v)
	}
}

// Bad flow fields: caddy validate names the file, line and field.
func TestFlowValidateErrors(t *testing.T) {
	cases := []struct {
		body string
		line int
		want string
	}{
		{"ratelimit {\n\t\tqps 10\n\t\tmax_queue_wait 100ms\n\t}", 10, "field max_queue_wait=\"100ms\": applies to control_behavior pace"},
		{"ratelimit {\n\t\tqps 10\n\t\tcontrol_behavior warm_up\n\t\twarm_up_period 10s\n\t\tcold_factor 1\n\t}", 12, "field cold_factor=\"1\": want a number > 1"},
		{"ratelimit {\n\t\tqps 10\n\t\tmax_concurrent adaptive\n\t\tmin_limit 20\n\t\tmax_limit 10\n\t}", 11, "field min_limit=\"20\": 20 exceeds max_limit 10"},
		{"ratelimit {\n\t\tqps 10\n\t\tmax_concurrent adaptive\n\t\tscope cluster\n\t}", 10, "field max_concurrent=\"adaptive\": adaptive works per instance only"},
		{"ratelimit {\n\t\tqps 10\n\t\tcontrol_behavior warm_up\n\t\twarm_up_period 10s\n\t\tscope cluster\n\t\tlease_size 5\n\t}", 13, "field lease_size=\"5\": does not apply to control_behavior warm_up with scope cluster"},
	}
	for _, c := range cases {
		s := caddyfile(t, "", "\t"+c.body+"\n\trespond \"ok\"")
		err := testcaddy.Validate(s.cfg)
		if err == nil || !strings.Contains(err.Error(), "Caddyfile:"+strconv.Itoa(c.line)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want Caddyfile:%d and %q", c.body, err, c.line, c.want)
		}
	}
}

// The same bad fields from Redis and the admin API: rejected, the last
// good rule stays in force.
func TestFlowBadRuleFromRedisAndAdminKeepsLastGood(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	redistest.Push(t, c, "rate_limit:rule:api", "gateway:rules:rate_limit", "api",
		"qps", "0.01", "burst", "3", "key_resolver", "global")
	s := caddyfile(t, fmt.Sprintf("\trulestore {\n\t\tredis %s\n\t}", r.URL()), "ratelimit api\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	testcaddy.Eventually(t, 10*time.Second, "rule api loaded from redis", func() bool { return limitHeader(t, s.urls[0]) == "3" })
	bad := [][]any{
		{"max_queue_wait", "1s"},
		{"control_behavior", "warm_up", "warm_up_period", "5s", "cold_factor", "0.5"},
		{"max_concurrent", "adaptive", "min_limit", "9", "max_limit", "3"},
		{"max_concurrent", "adaptive", "scope", "cluster"},
	}
	for i, fields := range bad {
		redistest.Push(t, c, "rate_limit:rule:api", "gateway:rules:rate_limit", "api", fields...)
		marker := fmt.Sprintf("marker%d", i)
		redistest.Push(t, c, "rate_limit:rule:"+marker, "gateway:rules:rate_limit", marker, "qps", "1")
		testcaddy.Eventually(t, 10*time.Second, "later update applied", func() bool {
			_, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/rules/rate_limit/%s", s.adminPort, marker))
			return strings.Contains(body, `"qps"`)
		})
		if got := limitHeader(t, s.urls[0]); got != "3" {
			t.Fatalf("after bad update %v: limit %q, want the last good rule (3)", fields, got)
		}
		for j := 0; j < len(fields); j += 2 {
			c.HDel(context.Background(), "rate_limit:rule:api", fields[j].(string))
		}
	}
	// The admin API refuses the same fields, naming the field.
	req, _ := http.NewRequest("PUT", fmt.Sprintf("http://localhost:%d/sluice/rules/rate_limit/api2", s.adminPort),
		strings.NewReader(`{"qps": 10, "max_concurrent": "adaptive", "min_limit": 9, "max_limit": 3}`))
	req.Header.Set("Content-Type", "application/json")
	resp, body := testcaddy.Do(t, req)
	if resp.StatusCode != 400 || !strings.Contains(body, "min_limit") {
		t.Fatalf("admin PUT: %d %s, want 400 naming min_limit", resp.StatusCode, body)
	}
}

// warm_up in Caddy: a cold rule lets through about burst/cold_factor of a
// burst, not the whole burst a plain token bucket would.
func TestWarmUpColdBurstInCaddy(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 30
		burst 30
		key_resolver global
		control_behavior warm_up
		warm_up_period 1m
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	start := time.Now()
	admitted := 0
	for i := 0; i < 30; i++ {
		if status(t, s.urls[0]) == 200 {
			admitted++
		}
	}
	took := time.Since(start)
	// Cold: 10 at once (burst/3), then 10 req/s (qps/3) while the 30
	// requests take `took`; a warm bucket would admit all 30.
	if want := 10 + int(took.Seconds()*10) + 1; admitted < 9 || admitted > want || admitted >= 30 {
		t.Fatalf("cold burst: %d of 30 admitted in %v, want about 10 (at most %d)", admitted, took, want)
	}
}
