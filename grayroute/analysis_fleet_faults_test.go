package grayroute_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// faultProxy forwards loopback TCP to Redis and, once armed, fails a share
// of the commands at random, the two ways a busy network fails them: the
// command reaches Redis and its reply is lost (the connection is cut after
// it), or it is held until the caller's deadline passes (then cut).
type faultProxy struct {
	ln       net.Listener
	target   string
	rate     atomic.Uint64 // failures per million client writes
	injected atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func startFaultProxy(t *testing.T, target string) *faultProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *faultProxy) URL() string { return "redis://" + p.ln.Addr().String() }

func (p *faultProxy) forward(c net.Conn) {
	u, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var once sync.Once
	done := func() {
		once.Do(func() {
			c.Close()
			u.Close()
			p.mu.Lock()
			delete(p.conns, c)
			delete(p.conns, u)
			p.mu.Unlock()
		})
	}
	go func() { io.Copy(c, u); done() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			done()
			return
		}
		r := rand.Uint64N(1_000_000)
		fail := r < p.rate.Load()
		if fail && r%2 == 0 { // held past the caller's deadline, never answered
			p.injected.Add(1)
			time.Sleep(1500 * time.Millisecond) // sleep: the fault is a Redis that holds the call past the caller's deadline
			done()
			return
		}
		if _, err := u.Write(buf[:n]); err != nil {
			done()
			return
		}
		if fail { // executed, its reply lost
			p.injected.Add(1)
			time.Sleep(5 * time.Millisecond) // sleep: the fault is a reply lost after the call ran; the pause lets Redis finish it
			done()
			return
		}
	}
}

// fleetInterval is what an instance shows of one judged interval; two
// instances judging the same interval must show the same.
type fleetInterval struct {
	Outcome          string  `json:"outcome"`
	Action           string  `json:"action"`
	Weight           float64 `json:"weight"`
	NewWeight        float64 `json:"new_weight"`
	Scope            string  `json:"scope"`
	CanaryRequests   uint64  `json:"canary_requests"`
	CanaryErrors     uint64  `json:"canary_errors"`
	BaselineRequests uint64  `json:"baseline_requests"`
	BaselineErrors   uint64  `json:"baseline_errors"`
	StepRequests     uint64  `json:"step_requests"`
	ErrorEvidence    float64 `json:"error_evidence"`
	LatencyEvidence  float64 `json:"latency_evidence"`
}

// TestFleetAgreesThroughRedisFaults: two instances on one Redis, with 5 %
// of their Redis calls failing at random (a reply lost after the command
// ran, or no reply before the deadline). Every interval both judge shows
// the same fleet totals, evidence and verdict on both, however the faults
// fell: a write that was retried replaces rather than adds, one that went
// missing heals at the next, and an interval's counts are taken once for
// the whole fleet.
func TestFleetAgreesThroughRedisFaults(t *testing.T) {
	rds := redistest.Start(t)
	px := startFaultProxy(t, rds.Addr)
	urls, admins := startFleet(t, px.URL())
	// A canary that stays in analysis for the whole test: it advances
	// while healthy but never reaches max_weight within the test.
	rule := `{"target_version":"v2","fallback_version":"v1","analysis":"on","analysis_interval":"1s",
		"min_samples":"20","max_latency_ratio":"20","weight":"10","step_weight":"1","max_weight":"90","failure_threshold":"2"}`
	putGrayRule(t, admins[0], "c", rule)
	for _, a := range admins {
		testcaddy.Eventually(t, 10*time.Second, "the rule on "+a, func() bool {
			_, body := testcaddy.Get(t, a+"/sluice/rules/gray/c")
			return strings.Contains(body, `"analysis":"on"`)
		})
	}
	px.rate.Store(50_000) // 5 %

	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		n    atomic.Int64
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := n.Add(1)
				req, _ := http.NewRequest(http.MethodGet, urls[i%2], nil)
				req.Header.Set("X-User-Id", fmt.Sprintf("u%d", i))
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()

	judged := []map[int64]fleetInterval{{}, {}}
	collect := func() int {
		for i, a := range admins {
			_, body := testcaddy.Get(t, a+"/sluice/state")
			var st struct {
				Grayroute struct {
					Analysis []struct {
						Intervals []struct {
							Interval int64 `json:"interval"`
							fleetInterval
						} `json:"intervals"`
					} `json:"analysis"`
				} `json:"grayroute"`
			}
			if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Grayroute.Analysis) > 1 {
				t.Fatalf("%s /sluice/state: %v %s", a, err, body)
			}
			for _, c := range st.Grayroute.Analysis {
				for _, iv := range c.Intervals {
					judged[i][iv.Interval] = iv.fleetInterval
				}
			}
		}
		both := 0
		for iv := range judged[0] {
			if _, ok := judged[1][iv]; ok {
				both++
			}
		}
		return both
	}
	const want = 15
	testcaddy.Eventually(t, 120*time.Second, fmt.Sprintf("%d intervals judged by both instances", want), func() bool {
		return collect() >= want
	})
	if px.injected.Load() == 0 {
		t.Fatal("the proxy failed no Redis call")
	}
	differ := 0
	for iv, a := range judged[0] {
		b, ok := judged[1][iv]
		if !ok {
			continue
		}
		if a.Scope != "fleet" || b.Scope != "fleet" {
			t.Errorf("interval %d judged on %q and %q counts, want the fleet's on both", iv, a.Scope, b.Scope)
		}
		if a != b {
			differ++
			t.Errorf("interval %d judged differently:\n  %s %+v\n  %s %+v", iv, admins[0], a, admins[1], b)
		}
	}
	// A write of an instance's counts that Redis did not take shows in
	// /sluice/state and in the metric alike.
	px.rate.Store(0)
	missed := int64(0)
	for _, a := range admins {
		testcaddy.Eventually(t, 10*time.Second, "missed writes in the state and the metrics agree on "+a, func() bool {
			_, body := testcaddy.Get(t, a+"/sluice/state")
			var st struct {
				Grayroute struct {
					Analysis []struct {
						MissedWrites int64 `json:"missed_writes"`
					} `json:"analysis"`
				} `json:"grayroute"`
			}
			if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Grayroute.Analysis) != 1 {
				t.Fatalf("%s /sluice/state: %v %s", a, err, body)
			}
			m := metricValue(t, a, `sluice_grayroute_analysis_missed_writes_total{rule="c"}`)
			if m != st.Grayroute.Analysis[0].MissedWrites {
				return false
			}
			missed += m
			return true
		})
	}
	t.Logf("%d Redis calls failed by the proxy, %d of them writes of an instance's counts; %d intervals judged by both, %d differed",
		px.injected.Load(), missed, collect(), differ)
}

// metricValue reads one series from a process's /metrics (0 when absent).
func metricValue(t *testing.T, adminURL, series string) int64 {
	_, body := testcaddy.Get(t, adminURL+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return int64(n)
		}
	}
	return 0
}
