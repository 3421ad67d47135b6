package ratelimit

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// gcraLua is a baseline written for this benchmark: GCRA in one key, the
// algorithm github.com/go-redis/redis_rate uses (that module is not a
// dependency here), with Redis TIME as the clock, run by EVALSHA like ours.
const gcraLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local burst = tonumber(ARGV[1])
local interval = 1 / tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - burst * interval
if allow_at > now then
  return {0, math.ceil((allow_at - now) * 1000000)}
end
redis.call('SET', KEYS[1], string.format('%.6f', new_tat), 'PX', math.ceil((new_tat - now) * 1000) + 1)
return {1, 0}
`

var gcraScript = redis.NewScript(gcraLua)

// BenchmarkClusterDecision measures one cluster decision against a real
// Redis on loopback: our token bucket and sliding window scripts (one round
// trip per request), the GCRA baseline, and lease mode (tokens leased in
// blocks and spent locally). Rules never reject. Serial runs report the
// p99 latency of one decision.
func BenchmarkClusterDecision(b *testing.B) {
	srv := redistest.Start(b)
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr}, ContextTimeoutEnabled: true,
		MaxRetries: 1, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer c.Close()
	be := &testBackend{c: c, instances: 1}
	cases := []struct {
		name   string
		fields rulestore.Fields
	}{
		{"token_bucket", rulestore.Fields{"qps": "1e9"}},
		{"sliding_window", rulestore.Fields{"qps": "1e9", "limit_type": "sliding_window"}},
		{"token_bucket_lease100", rulestore.Fields{"qps": "1e9", "lease_size": "100"}},
		{"sliding_window_lease100", rulestore.Fields{"qps": "1e9", "limit_type": "sliding_window", "lease_size": "100"}},
		{"token_bucket_lease1000", rulestore.Fields{"qps": "1e9", "lease_size": "1000"}},
	}
	for _, tc := range cases {
		tc.fields["key_resolver"] = "global"
		r := clusterRule(b, tc.fields)
		b.Run(tc.name+"/serial", func(b *testing.B) {
			l := instance(b, be, "bench")
			e := l.engine(r)
			key := []byte("global")
			lat := make([]time.Duration, 0, b.N)
			calls := counterValue(l.counters.redisCalls)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				d := e.Take(r, key, l.now())
				lat = append(lat, time.Since(t0))
				if !d.OK() || d.Unknown {
					b.Fatalf("decision %d: %+v", i, d)
				}
			}
			b.StopTimer()
			reportP99(b, lat)
			b.ReportMetric((counterValue(l.counters.redisCalls)-calls)/float64(b.N), "calls/op")
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			l := instance(b, be, "bench")
			e := l.engine(r)
			calls := counterValue(l.counters.redisCalls)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := []byte("global")
				for pb.Next() {
					e.Take(r, key, l.now())
				}
			})
			b.ReportMetric((counterValue(l.counters.redisCalls)-calls)/float64(b.N), "calls/op")
		})
	}
	b.Run("gcra_baseline/serial", func(b *testing.B) {
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			cctx, cancel := context.WithTimeout(ctx, time.Second) // as ours: a per-call deadline
			res, err := gcraScript.Run(cctx, c, []string{"gcra:{global}"}, 1e9, 1e9).Int64Slice()
			cancel()
			lat = append(lat, time.Since(t0))
			if err != nil || res[0] != 1 {
				b.Fatalf("gcra: %v %v", res, err)
			}
		}
		b.StopTimer()
		reportP99(b, lat)
	})
	b.Run("gcra_baseline/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				cctx, cancel := context.WithTimeout(context.Background(), time.Second)
				gcraScript.Run(cctx, c, []string{"gcra:{global}"}, 1e9, 1e9)
				cancel()
			}
		})
	})
}

func reportP99(b *testing.B, lat []time.Duration) {
	if len(lat) < 100 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkClusterLeaseUsers is lease mode (lease_size 1000) over 10,000
// per-user keys, as the whole-server benchmark's cluster+lease case: every
// decision for one of the users picked at random, the engine's clock moving
// 50 µs per decision (20,000 requests per second, so a user comes back
// every 0.5 s on average, often after more than the rule's idle time of
// 1 s). Every user has leased once before the timer starts. It reports
// Redis calls per decision (only leases call Redis) and Redis's CPU per
// decision.
func BenchmarkClusterLeaseUsers(b *testing.B) {
	srv := redistest.Start(b)
	c := newTestClient(b, srv.Addr)
	be := &testBackend{c: c, instances: 1}
	keys := userKeys(10000)
	r := clusterRule(b, rulestore.Fields{"qps": "1e9", "lease_size": "1000", "key_resolver": "userId"})
	l := instance(b, be, "lease-users")
	e := l.engine(r)
	const step = int64(50 * time.Microsecond)
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	for _, k := range keys {
		if d := e.Take(r, k, clock.Add(step)); !d.OK() || d.Unknown {
			b.Fatalf("first lease of %s: %+v", k, d)
		}
	}
	calls := counterValue(l.counters.redisCalls)
	cpu0 := redisCPU(b, c)
	var refused atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32) // 64 callers on 2 cores, as wrk's 64 connections
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		for pb.Next() {
			d := e.Take(r, keys[rng.IntN(len(keys))], clock.Add(step))
			if !d.OK() || d.Unknown {
				refused.Add(1)
			}
			// No Release: the rule has no in-flight caps (it would be a
			// no-op, and the call through the interface moves d to the heap).
		}
	})
	b.StopTimer()
	if n := refused.Load(); n > 0 {
		b.Fatalf("%d of %d decisions refused or not answered by Redis", n, b.N)
	}
	b.ReportMetric((counterValue(l.counters.redisCalls)-calls)/float64(b.N), "calls/op")
	reportRedisCPU(b, c, cpu0)
}
