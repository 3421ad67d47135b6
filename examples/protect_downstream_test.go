package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// The protect-downstream load: a flash-sale burst of 40 requests at once,
// then 150 req/s (3× the service's healthy capacity of 50 req/s: 10
// workers × 200 ms) for two phases of pdPhaseLen: healthy (after
// pdStartup more), then with the capacity halved to 5 workers (the
// service slowed: 25 req/s). The rates are low so the run means the same
// on a busy 2-core machine under -race.
//
// pdStartup is the adaptive limit's start from nothing, which the healthy
// phase's measurement leaves out: slow start's jump into the flash sale
// (to 64, 6.4 C), the queue it leaves draining (to about 2.5 s), and the
// early minRTT re-measurement (a first minRTT rests on initial_limit's 8
// answers, so it is measured again after 10 sample windows: 25 answers at
// min_limit 4, about 2.8 s to 4.3 s). Within a measured half from 2.5 s
// on, that probe alone took the mean to 0.58 C, and the draining queue the
// p99 to 1.37 s.
const (
	pdBurst    = 40
	pdRate     = 150
	pdStartup  = 2 * time.Second
	pdPhaseLen = 5 * time.Second
	pdWork     = 200 * time.Millisecond
	pdCapA     = 10
	pdCapB     = 5
)

// pdRun is one gateway's figures; per phase, measured by the upstream
// over the phase's second half.
type pdRun struct {
	name              string
	admitted          [2]float64 // req/s answered 200 (by send time)
	inFlight          [2]float64 // mean in flight at the upstream
	maxInFlight       [2]int
	p99               [2]time.Duration // time in the upstream (queue + work)
	max10ms, max100ms int              // most requests the gateway let go in one 10 ms / 100 ms slot (X-Sent-At), whole run
	burst100ms        int              // most of the burst's requests the load generator wrote in one 100 ms
	stall             time.Duration    // the longest this process (the gateway) stalled during the run
	limits            []string         // the adaptive limit every 100 ms (its gateway only), shown when it fails
}

// TestProtectDownstream: examples/protect-downstream. Three gateways, one
// service, the same load; the table is the README's. Run with -v to see it.
func TestProtectDownstream(t *testing.T) {
	s := startScenario(t, "protect-downstream", 9001, 8080) // 8080: the helper expects it
	up := startUpstream(t, s.port[9001], "-capacity", fmt.Sprint(pdCapA), "-work", pdWork.String())
	var runs []pdRun
	for _, g := range []struct {
		name  string
		port  int
		watch func() string
	}{{"qps quota (40/s, burst 40)", 8081, nil}, {"paced (40/s)", 8082, nil}, {"adaptive in-flight", 8083, func() string {
		st, err := adaptiveStateOf(s.admin, "adaptive")
		if err != nil {
			return err.Error()
		}
		return st.String()
	}}} {
		runs = append(runs, drive(t, g.name, s.url(g.port), up, g.watch))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nservice: %d workers × %v (%d req/s), halved to %d after %v; offered %d req/s after a burst of %d\n",
		pdCapA, pdWork, int(float64(pdCapA)/pdWork.Seconds()), pdCapB, pdStartup+pdPhaseLen, pdRate, pdBurst)
	fmt.Fprintf(&b, "%-28s %17s %19s %17s %21s %17s %9s\n", "gateway", "admitted req/s", "in flight (mean)", "max in flight", "p99 in upstream", "max per 10/100ms", "stall")
	fmt.Fprintf(&b, "%-28s %8s %8s %9s %9s %8s %8s %10s %10s\n", "", "healthy", "slowed", "healthy", "slowed", "healthy", "slowed", "healthy", "slowed")
	for _, r := range runs {
		fmt.Fprintf(&b, "%-28s %8.1f %8.1f %9.1f %9.1f %8d %8d %10v %10v %10d/%-6d %9v\n", r.name, r.admitted[0], r.admitted[1],
			r.inFlight[0], r.inFlight[1], r.maxInFlight[0], r.maxInFlight[1],
			r.p99[0], r.p99[1], r.max10ms, r.max100ms, r.stall.Round(time.Millisecond))
	}
	t.Log(b.String())
	// make test runs without -v, so it asks for the table in a file.
	if dir := os.Getenv("SLUICE_REPORT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "protect-downstream.txt"), []byte("TestProtectDownstream (examples/protect-downstream):"+b.String()), 0o644); err != nil {
			t.Errorf("writing the table: %v", err)
		}
	}

	// rules.sh gives the quota gateway the adaptive limit too, live.
	s.rulesSh(t)
	s.waitRule(t, "rate_limit/quota", `"max_concurrent":"adaptive"`)

	plain, paced, adaptive := runs[0], runs[1], runs[2]
	// A QPS quota does not bound in-flight work: once the service serves
	// 25 req/s and the quota admits 40, 15 req/s pile up (~40 to ~75 in
	// flight over the measured half). 3 C is what the pile reaches ~1 s
	// into the phase, so it holds even if a starved load generator lagged.
	if plain.inFlight[1] < 3*pdCapB {
		t.Errorf("qps quota, service slowed: %.1f in flight, want the pile-up (>= %d)", plain.inFlight[1], 3*pdCapB)
	}
	// The piled-up requests wait for seconds in the service (1.5 s to 3 s
	// expected); assert 3× the work time.
	if plain.p99[1] < 3*pdWork {
		t.Errorf("qps quota, service slowed: p99 %v, want >= %v", plain.p99[1], 3*pdWork)
	}
	// Pacing spaces admissions 25 ms apart: at most 1 per 10 ms slot and
	// 5 per 100 ms (counted by when the gateway let them go). A stalled
	// gateway process (GC, -race, a busy machine) releases the timers
	// that came due meanwhile together: a stall of s lets go
	// (s + window)/25ms + 1 in one window. The run measured its longest
	// stall; the burst's pulse would be 40. The upstream counts arrivals,
	// which its own process and the proxied connection may delay by a few
	// ms more than the gateway's stall (unmeasured: a run with an 11 ms
	// stall counted 2 in one 10 ms slot), so 10 ms of that is allowed too.
	const arrivalJitter = 10 * time.Millisecond
	pacedMost := func(stall, window time.Duration) int {
		return int((stall+arrivalJitter+window)/(25*time.Millisecond)) + 1
	}
	slots := func(window time.Duration) int { return pacedMost(paced.stall, window) }
	// The burst of 40 passes at once (the bucket is full): a pulse, what
	// pacing never lets through. The load generator opens 40 connections
	// and the gateway 40 to the service, which a busy machine spreads
	// out: beside a second test suite the 40, written within 100 ms, came
	// at most 9 in one 100 ms. So the pulse asked for is more than pacing
	// could let go in 100 ms with the quota gateway's own longest stall
	// (6 with a 5 ms stall), and no more than half of what the generator
	// wrote in one 100 ms (a crowded machine spreads the generator too).
	if want := min(pacedMost(plain.stall, 100*time.Millisecond)+1, plain.burst100ms/2); plain.max100ms < want {
		t.Errorf("qps quota: most arrivals in 100 ms %d, want the burst's pulse (>= %d, more than pacing lets go; the load generator wrote up to %d of the burst in 100 ms)",
			plain.max100ms, want, plain.burst100ms)
	}
	if paced.max10ms > slots(10*time.Millisecond) || paced.max100ms > slots(100*time.Millisecond) {
		t.Errorf("paced: %d per 10 ms, %d per 100 ms with a longest stall of %v; want <= %d and <= %d (no pulse)",
			paced.max10ms, paced.max100ms, paced.stall, slots(10*time.Millisecond), slots(100*time.Millisecond))
	}
	// The adaptive limit keeps the service near its capacity: in flight
	// settles about C + 1 (1.1–1.2 C: the served concurrency plus a
	// headroom of one request), in both phases (so it followed the
	// halving). The upper bound is the 1.5 C for C = 10, and for
	// C = 5 the 1.7 C the simulation asserts for this very case (200 ms,
	// 10 → 5: the limit moves in whole requests; 0.91–1.61 C
	// over 20 seeds, ratelimit/adaptive_goals_test.go); clean-clone runs
	// measured 1.16–1.50 C slowed. The capacity-halving bug of issue 28
	// (1.75–2 C at 20 ms) is the simulation's to catch: this example never
	// showed it. A busy machine mostly makes the limit err low (a starved
	// gateway or upstream process adds latency the limit takes for a
	// queue), so the lower bound is the 0.7 C less a margin,
	// 0.6 C; a minRTT probe that met a stall errs high instead (a run
	// beside two more suites, load 12-14, measured 1.50 C slowed with a
	// 187 ms stall). The healthy phase's bounds hold from pdStartup on:
	// ten runs beside a test suite read 0.71-1.18 C healthy and
	// 0.92-1.18 C slowed. The simulation asserts the same bounds over 40
	// seeds of this load (ratelimit/adaptive_flashsale_test.go).
	adaptiveFailed := false
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		adaptiveFailed = true
	}
	for i, c := range []int{pdCapA, pdCapB} {
		hiShare := map[int]float64{pdCapA: 1.5, pdCapB: 1.7}[c]
		if lo, hi := 0.6*float64(c), hiShare*float64(c); adaptive.inFlight[i] < lo || adaptive.inFlight[i] > hi {
			fail("adaptive, phase %d: %.1f in flight (%.2f C), want within [%.1f, %.1f]", i+1, adaptive.inFlight[i], adaptive.inFlight[i]/float64(c), lo, hi)
		}
		// Time in the service stays within 2× the uncontended 200 ms:
		// with no more than 2 C in flight, a queued request waits for at
		// most one work time. Allowed on top: the gateway's longest stall
		// (the requests it held meanwhile then queue in the service
		// together; a run with a 213 ms stall measured 608 ms) and 50 ms,
		// a quarter of the work time, for the upstream process's own
		// timers and goroutines running late on a busy machine, which the
		// stall monitor (in this process) does not see.
		if limit := 2*pdWork + adaptive.stall + 50*time.Millisecond; adaptive.p99[i] > limit || adaptive.p99[i] == 0 {
			fail("adaptive, phase %d: p99 %v in the service, want <= %v (2 × %v + a stall of %v + 50ms)", i+1, adaptive.p99[i], limit, pdWork, adaptive.stall)
		}
		if adaptive.maxInFlight[i] > 2*c {
			fail("adaptive, phase %d: at most %d in flight, want <= 2 C (%d)", i+1, adaptive.maxInFlight[i], 2*c)
		}
	}
	if adaptiveFailed {
		t.Logf("the adaptive limit every 100 ms (s from the burst):\n%s", strings.Join(adaptive.limits, "\n"))
	}
}

// drive runs the load against one gateway and measures it: the upstream's
// counters are reset half-way through each phase (the healthy one's
// startup left out) and read at its end. watch, if not nil, tells the
// gateway's state: it is called every 100 ms into run.limits.
func drive(t *testing.T, name, gateway, upstream string, watch func() string) pdRun {
	t.Helper()
	post(t, upstream+fmt.Sprintf("/capacity?value=%d", pdCapA))
	post(t, upstream+"/stats/reset")
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	run := pdRun{name: name}
	var ok [2]atomic.Int64
	var wg sync.WaitGroup
	var wroteMu sync.Mutex
	var wrote []time.Time // when each request of the burst was written
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		wroteMu.Lock()
		wrote = append(wrote, time.Now())
		wroteMu.Unlock()
	}}
	send := func(phase int, burst bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx := ctx
			if burst {
				rctx = httptrace.WithClientTrace(ctx, trace)
			}
			req, _ := http.NewRequestWithContext(rctx, "GET", gateway+"/work", nil)
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok[phase].Add(1)
				}
			}
		}()
	}
	pulse := func(st map[string]float64) {
		run.max10ms = max(run.max10ms, int(st["max_per_10ms"]))
		run.max100ms = max(run.max100ms, int(st["max_per_100ms"]))
	}
	read := func(phase int) {
		st := stats(t, upstream)
		pulse(st)
		run.inFlight[phase], run.maxInFlight[phase] = st["mean_in_flight"], int(st["max_in_flight"])
		run.p99[phase] = time.Duration(st["p99_ms"]) * time.Millisecond
	}
	// The stall monitor: a 1 ms ticker's longest silence beyond 1 ms.
	stopStall := make(chan struct{})
	stallDone := make(chan struct{})
	go func() {
		defer close(stallDone)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		prev := time.Now()
		for {
			select {
			case <-stopStall:
				return
			case <-tick.C:
				now := time.Now()
				run.stall = max(run.stall, now.Sub(prev)-time.Millisecond)
				prev = now
			}
		}
	}()
	begin := time.Now()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		if watch == nil {
			return
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopStall:
				return
			case <-tick.C:
				run.limits = append(run.limits, fmt.Sprintf("%5.1f %s", time.Since(begin).Seconds(), watch()))
			}
		}
	}()
	for i := 0; i < pdBurst; i++ {
		send(0, true)
	}
	// Open loop: request n goes at n/rate, however the earlier ones fare.
	half, slowed := pdPhaseLen/2, pdStartup+pdPhaseLen
	marks := []struct {
		at time.Duration
		do func()
	}{
		{pdStartup + half, func() { pulse(stats(t, upstream)); post(t, upstream+"/stats/reset") }},
		{slowed, func() { read(0); post(t, upstream+fmt.Sprintf("/capacity?value=%d", pdCapB)) }},
		{slowed + half, func() { pulse(stats(t, upstream)); post(t, upstream+"/stats/reset") }},
	}
	phase := func(at time.Duration) int { return int(min(at/slowed, 1)) }
	for n := 1; ; n++ {
		at := time.Duration(n) * time.Second / pdRate
		if at >= slowed+pdPhaseLen {
			break
		}
		for len(marks) > 0 && at >= marks[0].at {
			marks[0].do()
			marks = marks[1:]
		}
		time.Sleep(time.Until(begin.Add(at))) // sleep: the load generator's schedule
		send(phase(at), false)
	}
	read(1)
	wroteMu.Lock()
	slices.SortFunc(wrote, time.Time.Compare)
	for i, j := 0, 0; j < len(wrote); j++ {
		for wrote[j].Sub(wrote[i]) >= 100*time.Millisecond {
			i++
		}
		run.burst100ms = max(run.burst100ms, j-i+1)
	}
	wroteMu.Unlock()
	close(stopStall)
	<-stallDone
	<-watchDone
	cancel()
	wg.Wait()
	for i := range ok {
		run.admitted[i] = float64(ok[i].Load()) / []time.Duration{slowed, pdPhaseLen}[i].Seconds()
	}
	testcaddy.Eventually(t, 20*time.Second, name+": the upstream drained", func() bool { return stats(t, upstream)["in_flight"] == 0 })
	return run
}

func post(t testing.TB, url string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
}

func stats(t testing.TB, upstream string) map[string]float64 {
	_, body := testcaddy.Get(t, upstream+"/stats")
	var st map[string]float64
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("upstream stats %q: %v", body, err)
	}
	return st
}
