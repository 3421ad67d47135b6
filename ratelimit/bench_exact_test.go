package ratelimit

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkClusterExact measures exact cluster decisions (no lease: every
// decision answered by Redis) through the production path (clusterEngine
// Take) as a loaded Caddy makes them: 64 concurrent callers, 10,000
// per-user keys, a rule that never refuses. Besides ns/op (1e9 / ns/op is
// decisions per second) and allocations, it reports Redis's own CPU per
// decision (INFO cpu, user + sys, read before and after) and its inverse,
// decisions per Redis CPU-second: Redis runs scripts on one thread, so that
// is the ceiling of a whole fleet.
func BenchmarkClusterExact(b *testing.B) {
	srv := redistest.Start(b)
	c := newTestClient(b, srv.Addr)
	be := &testBackend{c: c, instances: 1}
	keys := make([][]byte, 10000)
	for i := range keys {
		keys[i] = []byte("user-" + strconv.Itoa(i))
	}
	for _, tc := range []struct {
		name   string
		fields rulestore.Fields
	}{
		{"token_bucket", rulestore.Fields{"qps": "1e9"}},
		{"sliding_window", rulestore.Fields{"qps": "1e9", "limit_type": "sliding_window"}},
	} {
		r := clusterRule(b, tc.fields)
		for _, callers := range []int{1, 64} {
			b.Run(tc.name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				l := instance(b, be, "bench")
				e := l.engine(r)
				var next atomic.Uint64
				var refused atomic.Int64
				cpu0 := redisCPU(b, c)
				b.ReportAllocs()
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0))) // RunParallel runs parallelism × GOMAXPROCS callers
				b.ResetTimer()
				if callers == 1 {
					for i := 0; i < b.N; i++ {
						if d := e.Take(r, keys[i%len(keys)], l.now()); !d.OK() || d.Unknown {
							refused.Add(1)
						}
					}
				} else {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							k := keys[next.Add(1)%uint64(len(keys))]
							if d := e.Take(r, k, l.now()); !d.OK() || d.Unknown {
								refused.Add(1)
							}
						}
					})
				}
				b.StopTimer()
				if n := refused.Load(); n > 0 {
					b.Fatalf("%d of %d decisions refused or not answered by Redis", n, b.N)
				}
				reportRedisCPU(b, c, cpu0)
			})
		}
	}
}

// reportRedisCPU reports Redis CPU per decision since cpu0.
func reportRedisCPU(b *testing.B, c redis.UniversalClient, cpu0 float64) {
	used := redisCPU(b, c) - cpu0
	if used <= 0 || b.N == 0 {
		return
	}
	b.ReportMetric(used*1e9/float64(b.N), "redis-cpu-ns/op")
	b.ReportMetric(float64(b.N)/used, "decisions/redis-cpu-s")
}

// redisCPU reads used_cpu_user + used_cpu_sys (seconds) from INFO cpu.
func redisCPU(b testing.TB, c redis.UniversalClient) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu %s: %v", k, err)
			}
			total += f
		}
	}
	return total
}
