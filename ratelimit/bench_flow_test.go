package ratelimit

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkTakeFlow is one decision of a flow-shaping rule when nothing
// waits (the slot is free, the adaptive limit not reached): the fast path's
// cost next to BenchmarkTake. Goal: <= 100 ns, 0 allocs. It reports the
// process's CPU time per decision beside ns/op, which on a busy machine
// counts the time the benchmark was descheduled.
func BenchmarkTakeFlow(b *testing.B) {
	for _, c := range []struct {
		name string
		f    rulestore.Fields
	}{
		{"pace", rulestore.Fields{"qps": "1e9", "control_behavior": "pace"}},
		{"warm_up", rulestore.Fields{"qps": "1e9", "control_behavior": "warm_up", "warm_up_period": "1s"}},
		{"warm_up_pace", rulestore.Fields{"qps": "1e9", "control_behavior": "warm_up_pace", "warm_up_period": "1s"}},
		{"adaptive", rulestore.Fields{"qps": "1e9", "max_concurrent": "adaptive", "min_limit": "100"}},
	} {
		c.f["key_resolver"] = "userId"
		r := mustRule(b, c.f)
		keys := make([][]byte, 1) // one hot key, as BenchmarkTake's keys=1
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "user:%d", i)
		}
		b.Run(c.name, func(b *testing.B) {
			l := newLimiter("bench-"+c.name, nil)
			defer l.Destruct()
			e := l.engine(r).(*localEngine)
			now := sec
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b)() // CPU time per decision: steadier than ns/op on a shared machine
			for i := 0; i < b.N; i++ {
				now += 1000
				d := e.Take(r, keys[i%len(keys)], now)
				if !d.OK() || d.Wait != 0 {
					b.Fatalf("refused or waiting: %+v", d)
				}
				e.Release(&d)
			}
		})
	}
}

// BenchmarkPaceGaps measures how evenly the handler releases paced
// requests at 1,000 qps: 50 clients keep the queue full, and the gaps
// between consecutive releases (the next handler being called) are
// compared with 1 ms. Reports the p50, mean and p99 of |gap - 1ms| in µs,
// and the process's CPU time per request. Goal: within ±1 ms.
func BenchmarkPaceGaps(b *testing.B) {
	f := rulestore.Fields{"qps": "1000", "control_behavior": "pace", "max_queue_wait": "1s", "key_resolver": "global", "headers": "off"}
	r, err := ParseRule(InlineID(f), f)
	if err != nil {
		b.Fatal(err)
	}
	lim := newLimiter(r.ID, nil)
	defer lim.Destruct()
	paceGaps(b, &Handler{inline: r, fixed: lim})
}

// BenchmarkPaceGapsCluster is BenchmarkPaceGaps for a paced cluster rule
// shared by two instances (two handlers with their own limiters, one
// Redis): the slots come from Redis, each instance waits for its own, and
// the gaps are measured over the releases of both.
func BenchmarkPaceGapsCluster(b *testing.B) {
	srv := redistest.Start(b)
	be := &testBackend{c: newTestClient(b, srv.Addr), instances: 2}
	f := rulestore.Fields{"qps": "1000", "control_behavior": "pace", "max_queue_wait": "1s", "key_resolver": "global",
		"headers": "off", "scope": "cluster", "redis_timeout": "1s"}
	r, err := ParseRule(InlineID(f), f)
	if err != nil {
		b.Fatal(err)
	}
	paceGaps(b, &Handler{inline: r, fixed: instance(b, be, r.ID)}, &Handler{inline: r, fixed: instance(b, be, r.ID)})
}

// paceGaps sends b.N requests from 50 clients spread over hs and reports
// the gap errors between consecutive releases at 1,000 qps.
func paceGaps(b *testing.B, hs ...*Handler) {
	var mu sync.Mutex
	released := make([]int64, 0, b.N)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t := engine.Now()
		mu.Lock()
		released = append(released, t)
		mu.Unlock()
		return nil
	})
	var wg sync.WaitGroup
	work := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		work <- struct{}{}
	}
	close(work)
	b.ResetTimer()
	cpu := reportCPU(b) // the waiters' CPU: a wait must not spin
	for c := 0; c < 50; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hs[c%len(hs)]
			w := &floodWriter{h: http.Header{}}
			for range work {
				req := httptest.NewRequest("GET", "/", nil)
				req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
				if err := h.ServeHTTP(w, req, next); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu()
	slices.Sort(released)
	var errs []float64
	for i := 1; i < len(released); i++ {
		errs = append(errs, math.Abs(float64(released[i]-released[i-1]-int64(time.Millisecond)))/1e3)
	}
	if len(errs) == 0 {
		return
	}
	var sum float64
	for _, e := range errs {
		sum += e
	}
	slices.Sort(errs)
	b.ReportMetric(float64(b.N-len(released)), "refused")
	b.ReportMetric(errs[len(errs)/2], "µs-p50-gap-error")
	b.ReportMetric(sum/float64(len(errs)), "µs-mean-gap-error")
	b.ReportMetric(errs[len(errs)*99/100], "µs-p99-gap-error")
}

// BenchmarkAdaptiveHealthyThroughput is what max_concurrent adaptive (all
// defaults) costs in front of a healthy upstream: one whose latency does
// not grow with load (10 ms, slept). Two sets of 40 clients in a closed
// loop send requests at the same time, one set through a handler with no
// in-flight limit, the other through one with the adaptive limit (side by
// side, so a busy machine slows both alike); a refused request costs its
// client the time an answer would have taken, so lost admissions are lost
// throughput. Each set sends b.N requests and goes on for at least
// adaptiveBenchRun, so the steady state is 16 sample windows and more
// whatever -benchtime asks (a 1 s run was mostly start-up, and one stall
// could decide it). It reports both rates and the adaptive one as a
// percentage of none over the whole run (the start's minRTT measurement at
// min_limit and the slow start from initial_limit included), over its
// second half and over its last second (steady state), the requests
// refused (in all and in the second half) and when the last was refused
// (ms after the start). Goal: >= 97 % in the steady state (the issue's
// "costs <= 3 % throughput").
func BenchmarkAdaptiveHealthyThroughput(b *testing.B) {
	const clients, latency = 40, 10 * time.Millisecond
	type result struct {
		whole, second, last float64 // req/s: all of the run, its second half, its last second
		refused, refused2   int64
		lastRefused         int64 // ns after the start
	}
	deadline := engine.Now() + int64(adaptiveBenchRun)
	run := func(f rulestore.Fields, start int64, out *result) {
		r, err := ParseRule(InlineID(f), f)
		if err != nil {
			b.Error(err)
			return
		}
		lim := newLimiter(r.ID, nil)
		defer lim.Destruct()
		h := &Handler{inline: r, fixed: lim}
		next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
			time.Sleep(latency) // sleep: the upstream's latency, the same at any concurrency
			return nil
		})
		var mu sync.Mutex
		var admitted, refused []int64
		var sent atomic.Int64
		var wg sync.WaitGroup
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for sent.Add(1) <= int64(b.N) || engine.Now() < deadline {
					req := httptest.NewRequest("GET", "/", nil)
					req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
					w := &floodWriter{h: http.Header{}}
					if err := h.ServeHTTP(w, req, next); err != nil {
						b.Error(err)
					}
					t := engine.Now()
					ok := w.status == 0 || w.status == http.StatusOK
					mu.Lock()
					if ok {
						admitted = append(admitted, t)
					} else {
						refused = append(refused, t)
					}
					mu.Unlock()
					if !ok {
						time.Sleep(latency) // sleep: a refused request costs its client an answer's time
					}
				}
			}()
		}
		wg.Wait()
		end := engine.Now()
		mid, lastSec := start+(end-start)/2, end-int64(time.Second)
		rate := func(from int64) float64 {
			n := 0
			for _, t := range admitted {
				if t >= from {
					n++
				}
			}
			return float64(n) / (float64(end-from) / 1e9)
		}
		*out = result{whole: rate(start), second: rate(mid), last: rate(lastSec), refused: int64(len(refused))}
		for _, t := range refused {
			if t >= mid {
				out.refused2++
			}
			out.lastRefused = max(out.lastRefused, t-start)
		}
	}
	b.ResetTimer()
	var none, ad result
	var wg sync.WaitGroup
	start := engine.Now()
	wg.Add(2)
	go func() {
		defer wg.Done()
		run(rulestore.Fields{"qps": "1e9", "key_resolver": "global", "headers": "off"}, start, &none)
	}()
	go func() {
		defer wg.Done()
		run(rulestore.Fields{"qps": "1e9", "key_resolver": "global", "headers": "off", "max_concurrent": "adaptive"}, start, &ad)
	}()
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(none.whole, "none-req/s")
	b.ReportMetric(ad.whole, "adaptive-req/s")
	b.ReportMetric(float64(ad.refused), "adaptive-refused")
	b.ReportMetric(float64(ad.refused2), "adaptive-refused-2nd-half")
	b.ReportMetric(float64(ad.lastRefused)/1e6, "ms-last-refusal")
	b.ReportMetric(100*ad.whole/none.whole, "%-of-none-whole")
	b.ReportMetric(100*ad.second/none.second, "%-of-none-2nd-half")
	b.ReportMetric(100*ad.last/none.last, "%-of-none-last-1s")
}

// adaptiveBenchRun is the shortest run of BenchmarkAdaptiveHealthyThroughput:
// its second half is 8 sample windows of the default 250 ms.
const adaptiveBenchRun = 4 * time.Second
