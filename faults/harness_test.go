package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/testcaddy"

	_ "github.com/sluicegw/sluice/caddyfile"
)

// soak is true under SLUICE_SOAK=1 (make soak): longer load phases, more
// reloads, more keys and rules.
var soak = os.Getenv("SLUICE_SOAK") != ""

// pick returns the short value, or the soak value under SLUICE_SOAK.
func pick[T any](short, long T) T {
	if soak {
		return long
	}
	return short
}

// phaseDur is how long each load phase lasts.
var phaseDur = pick(2*time.Second, 20*time.Second)

// latencyBounds are the pass/fail ceilings on the requests of each load
// phase. A request that waits on a hung Redis (paused: SIGSTOP) waits the
// client's timeout, and a request path that touches Redis makes nearly
// every request of a pause phase wait it, so the median catches it at half
// the timeout. The slowest request alone cannot: under -race on a busy
// 2-core machine a request on local rules with Redis healthy was seen at
// 400 ms, near the 500 ms timeout, so max only catches a request stuck
// beyond every timeout (short of the client's own 10 s): 5 s, as one
// request of the Redis restarts took 2.5 s beside another -race run.
type latencyBounds struct {
	median, max time.Duration
}

// storeTimeout is the store's Redis dial, read and write timeout in the
// chain config (chainConfig.String).
const storeTimeout = 500 * time.Millisecond

// latencyBound: requests on local rules never wait on Redis. Their median
// under -race on the busy 2-core machine was 50 ms at most in any fault
// phase (while a full -race test of another package ran beside), so half
// the timeout holds at 4x slowdown.
var latencyBound = latencyBounds{median: storeTimeout / 2, max: 5 * time.Second}

// busyLatency is for tests that load the store's own CPU (floods, many
// rules, reloads): requests queue behind that work on the 2 cores, so the
// median is the machine's, not Redis's (170 ms seen with 2,000 rules
// pushed under -race), and Redis is healthy throughout; only the max
// applies.
var busyLatency = latencyBounds{max: latencyBound.max}

// ---- load generator ----

// check inspects one response; a non-nil error is a failed request.
type check func(resp *http.Response, body string) error

// load sends paced requests from several workers and records latency and
// failures per phase (the phase current when the request started).
type load struct {
	t      testing.TB
	client *http.Client
	tr     *http.Transport
	next   func(n uint64) (*http.Request, check)
	n      atomic.Uint64
	phase  atomic.Pointer[string]
	stop   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	phases map[string]*phaseStats
	order  []string
}

type phaseStats struct {
	lat     []time.Duration
	fails   int
	retried int // extra sends after a reset before any response byte (see doCounted)
	samples []string
}

// isReset reports a connection refused or reset while connecting, or
// closed/reset before any byte of the response.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// doCounted sends a GET without a body and returns how many extra times it
// was sent after a reset before any response byte. When Caddy reloads, the
// old server closes its keep-alive connections and the old listener
// (SO_REUSEPORT) resets the connections still in its accept queue; such a
// request never reached a handler (TestReloadUnderLoad proves it: no quota
// is spent). Go's transport itself resends a GET whose reused connection
// was closed (RFC 9112 9.3.1); the trace counts those sends. If the request
// still failed with a reset, the test resends it on a new connection that
// nothing else reuses, at most freshResends times: a new connection can
// itself land in the old listener's accept queue just before that closes
// (seen once in ten fresh-clone runs, TestReloadKeepsRedisRules: the one
// resend was reset too). Every send is counted; callers add up the extra
// sends and assert a justified bound on them.
func doCounted(client *http.Client, req *http.Request) (resp *http.Response, extra int, err error) {
	// Atomic: the transport dials on a goroutine of its own, which may
	// still report after the request took another, idle connection.
	var sends atomic.Int32
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { sends.Add(1) },
		ConnectDone: func(_, _ string, err error) {
			if err != nil {
				sends.Add(1) // a refused dial is a send that got a reset
			}
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err = client.Do(req)
	for try := 0; try < freshResends && err != nil && isReset(err); try++ {
		resp, err = freshHTTP.Do(req)
	}
	return resp, max(0, int(sends.Load())-1), err
}

// freshResends bounds doCounted's own resends of one request: two new
// connections both reset means more than one listener hand-off, which a
// single reload does not make.
const freshResends = 2

// freshHTTP sends each request on a new connection: doCounted's resends,
// which the transport can then not resend again.
var freshHTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// startLoad runs `workers` workers sending `rate` requests per second in
// total until stopLoad. next builds request n and its check.
func startLoad(t testing.TB, rate, workers int, next func(n uint64) (*http.Request, check)) *load {
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	l := &load{t: t, tr: tr, client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		next: next, stop: make(chan struct{}), phases: map[string]*phaseStats{}}
	l.setPhase("start")
	interval := time.Duration(int64(time.Second) * int64(workers) / int64(rate))
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			due := time.Now().Add(interval * time.Duration(w) / time.Duration(workers))
			for {
				if d := time.Until(due); d > 0 {
					select {
					case <-l.stop:
						return
					case <-time.After(d):
					}
				} else {
					select {
					case <-l.stop:
						return
					default:
					}
				}
				due = due.Add(interval)
				if time.Until(due) < -time.Second {
					due = time.Now() // do not try to catch up a long stall
				}
				l.one()
			}
		}(w)
	}
	t.Cleanup(l.stopLoad)
	return l
}

func (l *load) one() {
	req, chk := l.next(l.n.Add(1))
	phase := *l.phase.Load()
	start := time.Now()
	resp, extra, err := doCounted(l.client, req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	lat := time.Since(start)
	if err == nil {
		err = chk(resp, string(body))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.phases[phase]
	ps.lat = append(ps.lat, lat)
	ps.retried += extra
	if err != nil {
		ps.fails++
		if len(ps.samples) < 5 {
			ps.samples = append(ps.samples, fmt.Sprintf("%s %s: %v", req.Method, req.URL, err))
		}
	}
}

// setPhase starts a new phase of the report.
func (l *load) setPhase(name string) {
	l.mu.Lock()
	if _, ok := l.phases[name]; !ok {
		l.phases[name] = &phaseStats{}
		l.order = append(l.order, name)
	}
	l.mu.Unlock()
	l.phase.Store(&name)
}

// sent is the number of requests started so far.
func (l *load) sent() uint64 { return l.n.Load() }

// stopLoad stops the workers, waits for them and closes idle connections.
func (l *load) stopLoad() {
	select {
	case <-l.stop:
		return
	default:
	}
	close(l.stop)
	l.wg.Wait()
	l.tr.CloseIdleConnections()
}

// report logs one line per phase (requests, failures, resends, latency
// percentiles) and fails the test on any failed request, a request slower
// than bound, or more extra sends (doCounted) than maxRetried. The caller
// justifies maxRetried: 0 where Caddy is not reloaded (nothing closes a
// connection), else at most two per connection per reload (one closed
// keep-alive connection and one reset in the old listener's queue).
func (l *load) report(bound latencyBounds, maxRetried int) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	total, fails, retried := 0, 0, 0
	for _, name := range l.order {
		ps := l.phases[name]
		if len(ps.lat) == 0 {
			continue
		}
		slices.Sort(ps.lat)
		q := func(p float64) time.Duration { return ps.lat[min(len(ps.lat)-1, int(p*float64(len(ps.lat))))] }
		mx, p50 := ps.lat[len(ps.lat)-1], q(0.50)
		l.t.Logf("RESULT phase=%-15s requests=%-6d failed=%d resent=%d p50=%v p99=%v max=%v",
			name, len(ps.lat), ps.fails, ps.retried, p50.Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), mx.Round(10*time.Microsecond))
		total += len(ps.lat)
		fails += ps.fails
		retried += ps.retried
		if ps.fails > 0 {
			l.t.Errorf("phase %s: %d failed requests, e.g.:\n  %s", name, ps.fails, strings.Join(ps.samples, "\n  "))
		}
		if bound.median > 0 && p50 > bound.median {
			l.t.Errorf("phase %s: median %v (bound %v): most requests waited on something, such as a timeout on Redis", name, p50, bound.median)
		}
		if mx > bound.max {
			l.t.Errorf("phase %s: a request took %v (bound %v)", name, mx, bound.max)
		}
	}
	l.t.Logf("RESULT total requests=%d failed=%d resent after a reset before any response byte=%d (bound %d)", total, fails, retried, maxRetried)
	if retried > maxRetried {
		l.t.Errorf("%d extra sends after a reset before any response byte, more than the bound %d", retried, maxRetried)
	}
	if total == 0 {
		l.t.Errorf("the load generator sent no request")
	}
}

// waitSent waits until n more requests have been started (so a phase
// really overlaps traffic).
func (l *load) waitSent(t testing.TB, n uint64) {
	t.Helper()
	target := l.sent() + n
	testcaddy.Eventually(t, 20*time.Second, fmt.Sprintf("%d more requests", n), func() bool { return l.sent() >= target })
}

// expect builds a check for a status and a body substring ("" = any).
func expect(status int, body string) check {
	return func(resp *http.Response, got string) error {
		if resp.StatusCode != status {
			return fmt.Errorf("status %d, want %d (body %.80q)", resp.StatusCode, status, got)
		}
		if !strings.Contains(got, body) {
			return fmt.Errorf("body %.80q, want %q", got, body)
		}
		return nil
	}
}

func mustRequest(url string, headers ...string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return req
}

// chainRequest is the full-chain traffic: 100 users, every 5th with
// X-Canary: true (the gray rule sends those to v2, the rest to v1).
func chainRequest(base string) func(n uint64) (*http.Request, check) {
	return func(n uint64) (*http.Request, check) {
		user := "X-User-Id: u" + strconv.FormatUint(n%100, 10)
		if n%5 == 0 {
			return mustRequest(base+"/orders", user, "X-Canary: true"), expect(200, "v2")
		}
		return mustRequest(base+"/orders", user), expect(200, "v1")
	}
}

// upstream is an HTTP server answering name on every path but /fail (500).
func upstream(t testing.TB, name string) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(500)
		}
		io.WriteString(w, name)
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// ---- Redis helpers ----

// testClient is a client of the test itself, named so CLIENT LIST counts
// can leave it out.
func testClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ClientName: "faults-test"})
	t.Cleanup(func() { c.Close() })
	return c
}

// push writes a rule hash (replacing it) and publishes its id.
func push(t testing.TB, c redis.Cmdable, kind, id string, fields ...string) {
	t.Helper()
	ctx := context.Background()
	key := kind + ":rule:" + id
	if kind == "binding" {
		key = "gateway:binding:" + id
	}
	args := make([]any, len(fields))
	for i, f := range fields {
		args[i] = f
	}
	pipe := c.TxPipeline()
	pipe.Del(ctx, key)
	pipe.HSet(ctx, key, args...)
	pipe.Publish(ctx, "gateway:rules:"+kind, id)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("push %s: %v", key, err)
	}
}

// del deletes a rule and publishes its id.
func del(t testing.TB, c redis.Cmdable, kind, id string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Del(ctx, kind+":rule:"+id).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, "gateway:rules:"+kind, id).Err(); err != nil {
		t.Fatal(err)
	}
}

// sluiceClients counts the connections to Redis that are not the test's
// own (Caddy's, directly or through the proxy).
func sluiceClients(t testing.TB, c *redis.Client) int {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatalf("client list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if line != "" && !strings.Contains(line, "name=faults-test") {
			n++
		}
	}
	return n
}

// ---- admin API helpers ----

// adminHTTP reads the admin API. Its timeout turns an admin call that
// hangs (e.g. on a paused Redis) into a failure instead of a stuck test.
var adminHTTP = &http.Client{Timeout: 5 * time.Second}

type ruleView struct {
	Source string            `json:"source"`
	Fields map[string]string `json:"fields"`
}

// adminRule reads GET /sluice/rules/{kind}/{id}; ok is false on 404.
func adminRule(t testing.TB, admin int, kind, id string) (v ruleView, ok bool) {
	t.Helper()
	resp, err := adminHTTP.Get(fmt.Sprintf("http://localhost:%d/sluice/rules/%s/%s", admin, kind, id))
	if err != nil {
		t.Fatalf("admin API: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return v, false
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("admin rule %s/%s: %v", kind, id, err)
	}
	return v, true
}

type storeStatus struct {
	Redis     bool           `json:"redis"`
	Connected bool           `json:"connected"`
	Resyncs   int64          `json:"resyncs"`
	Rejected  int64          `json:"rejected"`
	Rules     map[string]int `json:"rules"`
	Pool      *struct {
		Open   int `json:"open"`
		PubSub int `json:"pubsub"`
	} `json:"pool"`
}

// goroutineSlack is how many goroutines above the settled baseline a leak
// check tolerates: net/http keeps a goroutine per idle keep-alive
// connection and go-redis one per pooled connection's reader at most, both
// bounded by the load's 8 workers; a leak grows with every outage or reload
// (dozens over a test), far above this.
const goroutineSlack = 10

// redisConnsAccounted is the leak check for Redis connections: once
// settled, every connection Redis sees from Sluice belongs to the store's
// client (pooled command connections or subscribers), and the pool stays
// within go-redis's default size (10 per CPU). Idle pooled connections are
// not leaks: the pool keeps as many as the load's peak concurrency opened,
// which after an outage can exceed the quiet baseline.
func redisConnsAccounted(t testing.TB, c *redis.Client, admin int) (server, pooled int, ok bool) {
	t.Helper()
	st := adminStore(t, admin)
	if st.Pool == nil {
		t.Fatalf("/sluice/store has no pool figures")
	}
	server, pooled = sluiceClients(t, c), st.Pool.Open+st.Pool.PubSub
	return server, pooled, server == pooled && st.Pool.Open <= 10*runtime.NumCPU()
}

func adminStore(t testing.TB, admin int) storeStatus {
	t.Helper()
	resp, err := adminHTTP.Get(fmt.Sprintf("http://localhost:%d/sluice/store", admin))
	if err != nil {
		t.Fatalf("admin API: %v", err)
	}
	defer resp.Body.Close()
	var st storeStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("admin store: %v", err)
	}
	return st
}

// waitRule waits until a rule is in force with these field values (none:
// until it is absent).
func waitRule(t testing.TB, admin int, kind, id string, want map[string]string) {
	t.Helper()
	testcaddy.Eventually(t, 15*time.Second, fmt.Sprintf("%s rule %s = %v", kind, id, want), func() bool {
		v, ok := adminRule(t, admin, kind, id)
		if want == nil {
			return !ok
		}
		if !ok {
			return false
		}
		for k, val := range want {
			if v.Fields[k] != val {
				return false
			}
		}
		return true
	})
}

// metricsText reads the admin endpoint's /metrics.
func metricsText(t testing.TB, admin int) string {
	t.Helper()
	resp, err := adminHTTP.Get(fmt.Sprintf("http://localhost:%d/metrics", admin))
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metric returns the value of the sample whose name-and-labels text is
// exactly series (e.g. `sluice_ratelimit_keys{rule="x"}`), or -1.
func metric(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// processGoroutines reads the goroutine count of a Caddy process from its
// admin endpoint's pprof handler.
func processGoroutines(t testing.TB, admin int) int {
	t.Helper()
	resp, err := adminHTTP.Get(fmt.Sprintf("http://localhost:%d/debug/pprof/goroutine?debug=1", admin))
	if err != nil {
		t.Fatalf("pprof: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	first, _, _ := strings.Cut(string(b), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(first, "goroutine profile: total "))
	if err != nil {
		t.Fatalf("pprof answer %q: %v", first, err)
	}
	return n
}

// within polls cond until it holds (true) or the timeout passes (false),
// for invariants whose failure message needs the last values seen.
func within(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond) // sleep: poll interval of a condition wait
	}
	return true
}

// goroutineDump is a Caddy process's goroutine profile, for failure messages.
func goroutineDump(t testing.TB, admin int) string {
	resp, err := adminHTTP.Get(fmt.Sprintf("http://localhost:%d/debug/pprof/goroutine?debug=1", admin))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func clientList(t testing.TB, c *redis.Client) string {
	s, err := c.ClientList(context.Background()).Result()
	if err != nil {
		return err.Error()
	}
	return s
}

// ---- a TCP proxy between Caddy and Redis, to partition them ----

// proxy forwards loopback TCP to a target. Cut drops every connection and
// refuses new ones (accepted, then closed at once) until Heal, while Redis
// itself stays up and writable: a partition of Caddy from Redis.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func startProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *proxy) URL() string { return "redis://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		go p.forward(c)
	}
}

func (p *proxy) forward(c net.Conn) {
	u, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := func() {
		c.Close()
		u.Close()
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, u)
		p.mu.Unlock()
	}
	go func() { io.Copy(u, c); done() }()
	io.Copy(c, u)
	done()
}

// Cut partitions: every open connection is closed, new ones are refused.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal ends the partition.
func (p *proxy) Heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
