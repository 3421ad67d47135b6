package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkChainRedisState measures requests through in-process Caddy, in
// parallel over keep-alive connections, while Redis is up, paused
// (SIGSTOP) and dead: the full chain on local rules (one pushed from Redis)
// and a scope cluster rule (on_redis_error local). It reports ns/op and the
// p50/p99 latency of single requests; a request on local rules must not
// care about Redis.
//
//	go test -run '^$' -bench ChainRedisState -benchtime 2s ./faults/
func BenchmarkChainRedisState(b *testing.B) {
	redis.SetLogger(quietRedis{}) // go-redis logs every failed dial while Redis is dead
	r := redistest.Start(b)
	c := testClient(b, r.Addr)
	admin, site := testcaddy.FreePort(b), testcaddy.FreePort(b)
	cfg := chainConfig{
		globals: fmt.Sprintf("admin localhost:%d\n\tpersist_config off\n\tstorage file_system %s\n\tlog {\n\t\toutput file %s\n\t}",
			admin, b.TempDir(), filepath.Join(b.TempDir(), "caddy.log")),
		redisURL: r.URL(), gw: testcaddy.FreePort(b), aux: testcaddy.FreePort(b),
		v1: upstream(b, "v1"), v2: upstream(b, "v2"),
		rules: `rate_limit cluster_rl {
			qps            1000000000
			burst          1000000000
			key_resolver   userId
			scope          cluster
		}`,
		extra: fmt.Sprintf("http://127.0.0.1:%d {\n\tratelimit cluster_rl\n\trespond \"ok\"\n}\n", site),
	}
	push(b, c, "rate_limit", "order_api", "qps", "1000000000", "burst", "1000000000", "key_resolver", "userId")
	testcaddy.Run(b, cfg.String())
	waitRule(b, admin, "rate_limit", "order_api", map[string]string{"qps": "1000000000"})
	chain := fmt.Sprintf("http://127.0.0.1:%d/orders", cfg.gw)
	cluster := fmt.Sprintf("http://127.0.0.1:%d/", site)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}

	run := func(b *testing.B, url string) {
		var mu sync.Mutex
		var lat []time.Duration
		var n atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var mine []time.Duration
			for pb.Next() {
				req := mustRequest(url, fmt.Sprintf("X-User-Id: u%d", n.Add(1)%100))
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				mine = append(mine, time.Since(start))
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
		b.StopTimer()
		if len(lat) > 0 {
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		}
	}
	for _, state := range []string{"up", "paused", "dead"} {
		switch state {
		case "paused":
			r.Pause()
		case "dead":
			r.Resume()
			r.Kill()
		}
		b.Run("local-rules/redis-"+state, func(b *testing.B) { run(b, chain) })
		b.Run("cluster-rule/redis-"+state, func(b *testing.B) { run(b, cluster) })
	}
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
