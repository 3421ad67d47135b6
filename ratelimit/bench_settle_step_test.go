package ratelimit

import (
	"fmt"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"net/http"
	"testing"
	"time"
)

// BenchmarkSettleStep is the settle path without the handler around it,
// paired as BenchmarkSettlePaired: a local token bucket rule's decision
// for one of 10,000 keys, alone and, in every other block of settleBlock
// requests, followed by the response's cost read from a response header
// map and the settlement at the decision's entry, counted as ServeHTTP
// counts it. settle-ns/op is the median per-pair difference.
func BenchmarkSettleStep(b *testing.B) {
	r := mustRule(b, settleCases()[1].fields)
	lim := newLimiter(r.ID, nil)
	b.Cleanup(func() { lim.Destruct() })
	eng := lim.engine(r)
	keys := make([][]byte, 10_000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user:%d", i))
		decide(eng, r, keys[i], lim.now(), r.Cost)
	}
	h := http.Header{"Server": serverHeader, "X-Tokens-Used": tokensUsed,
		"Ratelimit-Limit": {"1"}, "Ratelimit-Remaining": {"1"}, "Ratelimit-Reset": {"1"}}
	var perReq [2][]float64
	b.ReportAllocs()
	b.ResetTimer()
	cur, start := 0, time.Now()
	for i := 0; i < b.N; i++ {
		key := keys[i%len(keys)]
		d := decide(eng, r, key, lim.now(), r.Cost)
		if cur == 1 {
			settleResponse(r, lim, eng, key, engine.RefOf(&d), r.charge(finished, 0, r.Cost, h))
		}
		if (i+1)%settleBlock == 0 {
			now := time.Now()
			perReq[cur] = append(perReq[cur], float64(now.Sub(start))/settleBlock)
			cur, start = 1-cur, now
		}
	}
	if n := min(len(perReq[0]), len(perReq[1])); n >= 10 {
		b.ReportMetric(pairedDiffs(perReq, n)[n/2], "settle-ns/op")
	}
}
