package redissource

import (
	"context"
	"fmt"
	"github.com/sluicegw/sluice/rulestore"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore/redisconf"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// BenchmarkPropagation measures PUBLISH -> rule in force in a running store,
// over 1,000 updates, with 10,000 rules loaded. It reports p50/p99/max.
func BenchmarkPropagation(b *testing.B) {
	r := redistest.Start(b)
	c := r.Client()
	ctx := context.Background()
	seed(b, c, 10000)
	app := startBenchStore(b, r.URL())
	waitFor(b, func() bool { return len(app.Rules(rulestore.RateLimit)) == 10000 })
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		var delays []time.Duration
		for i := 0; i < 1000; i++ {
			qps := strconv.Itoa(n*1000 + i + 1)
			c.HSet(ctx, "rate_limit:rule:rule_7", "qps", qps)
			start := time.Now()
			c.Publish(ctx, "gateway:rules:rate_limit", "rule_7")
			deadline := start.Add(10 * time.Second)
			for {
				if r := app.Lookup(rulestore.RateLimit, "rule_7"); r != nil && r.Fields["qps"] == qps {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("update %s not in force 10 s after its PUBLISH: lost", qps)
				}
				// A busy poll (Gosched) starves the store's goroutines on 2
				// cores (p99 10 ms measured); a 10µs timer lets them run and
				// adds at most one timer tick to the figure.
				time.Sleep(10 * time.Microsecond) // sleep: see above
			}
			delays = append(delays, time.Since(start))
		}
		sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
		b.ReportMetric(float64(delays[500].Microseconds()), "p50-µs")
		b.ReportMetric(float64(delays[990].Microseconds()), "p99-µs")
		b.ReportMetric(float64(delays[999].Microseconds()), "max-µs")
	}
}

// BenchmarkFullResync times a full resync of 10,000 rules and counts the
// Redis commands it sends.
func BenchmarkFullResync(b *testing.B) {
	r := redistest.Start(b)
	c := r.Client()
	seed(b, c, 10000)
	b.Setenv("XDG_DATA_HOME", b.TempDir()) // no local rule snapshot of another run
	opts := &redisconf.Config{URL: r.URL()}
	rs, err := acquireSource(rulestore.RedisSourceConfig{Redis: opts, Resync: time.Hour, Logger: nopLogger})
	if err != nil {
		b.Fatal(err)
	}
	src := rs.(*redisSource)
	key := src.poolKey
	defer sources.Delete(key)
	ctx := context.Background()
	b.ResetTimer()
	// The INFO calls that count commands run with the timer stopped: only
	// the resync is timed.
	var cmds int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		src.snap.Store(rulestore.NewLayer()) // a cold resync: every rule is parsed
		before := commands(b, c)
		b.StartTimer()
		if err := src.fullResync(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cmds += commands(b, c) - before - 1 // less the INFO itself
		b.StartTimer()
	}
	b.ReportMetric(float64(cmds)/float64(b.N), "redis-cmds")
	if n := len(src.snapshot().Of(rulestore.RateLimit)); n != 10000 {
		b.Fatalf("loaded %d rules", n)
	}
}

func seed(b *testing.B, c *redis.Client, n int) {
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := 0; i < n; i++ {
		pipe.HSet(ctx, fmt.Sprintf("rate_limit:rule:rule_%d", i), "limit_type", "TOKEN_BUCKET", "qps", "100", "key_resolver", "userId")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
}

// commands reads the server's total command count (INFO stats).
func commands(b *testing.B, c *redis.Client) int {
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	b.Fatal("no total_commands_processed")
	return 0
}

func waitFor(b *testing.B, cond func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond) // sleep: poll interval of a condition wait
	}
}

// BenchmarkKillSwitchPropagation measures the kill switch of a statically
// declared rule: HSET of one field, PUBLISH, until Lookup returns the
// overlaid rule (the new field over the static ones), over 200 changes. It
// reports p50/p99/max; the goal is 10 ms on every instance.
func BenchmarkKillSwitchPropagation(b *testing.B) {
	r := redistest.Start(b)
	c := r.Client()
	ctx := context.Background()
	app := &rulestore.App{Redis: &redisconf.Config{URL: r.URL()}, Resync: syntax.Duration(time.Hour),
		RateLimit: map[string]rulestore.Fields{"switch": {"qps": "1000", "burst": "2000"}}}
	cctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	if err := app.Provision(cctx); err != nil {
		b.Fatal(err)
	}
	app.Source().(*redisSource).logger = nopLogger
	app.Start()
	b.Cleanup(func() { app.Cleanup(); app.Stop() })
	waitFor(b, func() bool { return app.Source().(*redisSource).status.connected.Load() })
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		var delays []time.Duration
		for i := 0; i < 200; i++ {
			qps := strconv.Itoa(n*200 + i + 1)
			c.HSet(ctx, "rate_limit:rule:switch", "qps", qps)
			start := time.Now()
			deadline := start.Add(10 * time.Second)
			c.Publish(ctx, "gateway:rules:rate_limit", "switch")
			for {
				if r := app.Lookup(rulestore.RateLimit, "switch"); r.Fields["qps"] == qps && r.Fields["burst"] == "2000" {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("kill switch qps=%s not in force 10s after its publish", qps)
				}
				time.Sleep(10 * time.Microsecond) // sleep: as BenchmarkPropagation, a busy poll starves the store
			}
			delays = append(delays, time.Since(start))
		}
		sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
		b.ReportMetric(float64(delays[100].Microseconds()), "p50-µs")
		b.ReportMetric(float64(delays[198].Microseconds()), "p99-µs")
		b.ReportMetric(float64(delays[199].Microseconds()), "max-µs")
	}
}
