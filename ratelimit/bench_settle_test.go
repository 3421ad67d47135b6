package ratelimit

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
)

// tokensUsed is the upstream's report, set without allocating (a shared
// slice, as a proxied response's header arrives already parsed).
var tokensUsed = []string{"3"}

// usageNext answers "ok" with X-Tokens-Used: 3, as an upstream reporting
// its cost does; both cases of the settle benchmarks run it, so the
// difference between them is the settle path.
var usageNext = usageNextReporting(tokensUsed)

// usageNextReporting answers "ok" with X-Tokens-Used: used.
func usageNextReporting(used []string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header()["X-Tokens-Used"] = used
		w.WriteHeader(http.StatusOK)
		_, err := w.Write([]byte("ok"))
		return err
	})
}

// settleCases are a rule with response_cost (reserve 1, the upstream
// reporting 3: 2 more tokens charged per request) and the same rule
// without it (cost 1 spent at admission, nothing after): the request
// path's cost of settling is the difference.
func settleCases() []struct {
	name   string
	fields rulestore.Fields
} {
	return []struct {
		name   string
		fields rulestore.Fields
	}{
		{"response_cost=off", rulestore.Fields{"qps": "1e9", "key_resolver": "userId"}},
		{"response_cost=on", rulestore.Fields{"qps": "1e9", "key_resolver": "userId",
			"response_cost": "{http.response.header.X-Tokens-Used}", "reserve": "1", "max_cost": "10"}},
	}
}

// BenchmarkSettle is the production handler (ServeHTTP, headers on) on a
// local rule over 10,000 users that never rejects, in front of an
// upstream reporting its cost: with response_cost (each request settled
// after its response, counted in sluice_ratelimit_cost_tokens_total) and
// without. See docs/performance.md.
func BenchmarkSettle(b *testing.B) {
	for _, tc := range settleCases() {
		b.Run(tc.name, func(b *testing.B) {
			h := benchHandler(b, tc.fields)
			benchHandlerParallel(b, h, usageNext, runtime.GOMAXPROCS(0), 10_000)
		})
	}
}

// BenchmarkSettleCluster is BenchmarkSettle on a scope cluster rule
// against a real Redis on loopback, 64 concurrent callers over 1,000
// users. Besides
// ns/op it reports Redis round trips and script calls per request: the
// settlement is one more script call, riding in the same pipelines as the
// decisions (its reply also says whether the key entered debt, so the
// metrics and the ratelimit_debt event add no call).
func BenchmarkSettleCluster(b *testing.B) {
	srv := redistest.Start(b)
	be := &testBackend{c: newTestClient(b, srv.Addr), instances: 1}
	for _, tc := range settleCases() {
		b.Run(tc.name, func(b *testing.B) {
			r := clusterRule(b, tc.fields)
			l := instance(b, be, "bench-settle")
			h := &Handler{inline: r, fixed: l}
			bt := gateOf(be).Batch
			_, rt0, sc0 := bt.Stats()
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism(max(1, 64/procs))
			benchHandlerParallel(b, h, usageNext, max(1, 64/procs)*procs, 1000)
			_, rt, sc := bt.Stats()
			b.ReportMetric(float64(rt-rt0)/float64(b.N), "roundtrips/op")
			b.ReportMetric(float64(sc-sc0)/float64(b.N), "scripts/op")
		})
	}
}

// benchHandlerParallel runs requests of users through h in front of next
// from callers goroutines (RunParallel's, set by the caller), each with
// its own requests and replacer, as BenchmarkServeHTTP does.
func benchHandlerParallel(b *testing.B, h caddyhttp.MiddlewareHandler, next caddyhttp.Handler, callers, users int) {
	sets := make([]*benchRequests, callers)
	for i := range sets {
		sets[i] = newBenchRequests(users)
	}
	var worker atomic.Int32
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		br := sets[int(worker.Add(1)-1)%callers]
		w := &discardWriter{h: http.Header{}}
		i := 0
		for pb.Next() {
			i++
			clear(w.h)
			w.h["Server"] = serverHeader
			if err := h.ServeHTTP(w, br.next(i), next); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSettleCharge is the local settlement alone, on 10,000 keys
// admitted beforehand: found by a lookup of the key (settle) or at the
// entry its decision found (settleAt), as the settle path does while the
// shard removed no entry since. The clock is not read (a fixed time).
func BenchmarkSettleCharge(b *testing.B) {
	r := mustRule(b, rulestore.Fields{"qps": "1e9", "key_resolver": "userId",
		"response_cost": "{http.response.header.X-Tokens-Used}", "reserve": "1", "max_cost": "10"})
	e := newLocalEngine(r)
	keys := make([][]byte, 10_000)
	refs := make([]engine.EntryRef, len(keys))
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user:%d", i))
		d := e.take(r, keys[i], 1e9, r.Cost)
		refs[i] = engine.RefOf(&d)
	}
	b.Run("lookup", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			e.settle(r, keys[i%len(keys)], 1e9, 2)
		}
	})
	clock := func() int64 { return 1e9 }
	b.Run("entry", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			k := i % len(keys)
			e.settleAt(r, keys[k], refs[k], clock, 2)
		}
	})
}

// settleBlock is how many requests of one case BenchmarkSettlePaired runs
// before it turns to the other: about a millisecond, far shorter than the
// drift of a shared box's speed, far longer than a clock read.
const settleBlock = 1000

// BenchmarkSettlePaired is the settle path's cost as one figure: the two
// cases of BenchmarkSettle (production ServeHTTP, 10,000 users) in one
// goroutine, alternating every settleBlock requests, so whatever slows the
// box in a given millisecond slows both alike. It reports the median of
// the per-pair difference on − off in ns per request (settle-ns/op) and
// the 10th and 90th percentiles of those differences; ns/op is the mean of
// both cases. settle-cpu-ns/op is the same median of the thread's CPU
// time (Linux): a block the scheduler paused, on a busy box, does not
// count the pause.
func BenchmarkSettlePaired(b *testing.B) {
	cases := settleCases()
	hs := [2]*Handler{benchHandler(b, cases[0].fields), benchHandler(b, cases[1].fields)}
	brs := [2]*benchRequests{newBenchRequests(10_000), newBenchRequests(10_000)}
	ws := [2]*discardWriter{{h: http.Header{}}, {h: http.Header{}}}
	var perReq, perReqCPU [2][]float64
	runtime.LockOSThread() // the thread's CPU time is the loop's
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	cur, start, startCPU := 0, time.Now(), threadCPU()
	for i := 0; i < b.N; i++ {
		w := ws[cur]
		clear(w.h)
		w.h["Server"] = serverHeader
		if err := hs[cur].ServeHTTP(w, brs[cur].next(i), usageNext); err != nil {
			b.Fatal(err)
		}
		if (i+1)%settleBlock == 0 {
			now, cpu := time.Now(), threadCPU()
			perReq[cur] = append(perReq[cur], float64(now.Sub(start))/settleBlock)
			perReqCPU[cur] = append(perReqCPU[cur], float64(cpu-startCPU)/settleBlock)
			cur, start, startCPU = 1-cur, now, cpu
		}
	}
	n := min(len(perReq[0]), len(perReq[1]))
	if n < 10 {
		return // the framework's first short runs
	}
	diffs := pairedDiffs(perReq, n)
	b.ReportMetric(diffs[n/2], "settle-ns/op")
	b.ReportMetric(diffs[n/10], "settle-p10-ns/op")
	b.ReportMetric(diffs[n*9/10], "settle-p90-ns/op")
	if startCPU != 0 {
		b.ReportMetric(pairedDiffs(perReqCPU, n)[n/2], "settle-cpu-ns/op")
	}
}

// pairedDiffs are the differences on − off of the first n block pairs,
// sorted.
func pairedDiffs(perReq [2][]float64, n int) []float64 {
	diffs := make([]float64, n)
	for k := range diffs {
		diffs[k] = perReq[1][k] - perReq[0][k]
	}
	slices.Sort(diffs)
	return diffs
}
