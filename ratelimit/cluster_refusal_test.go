package ratelimit

import (
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// A refusal one instance remembers ends within clusterRecheck, so a refund
// made on another instance is seen there within about a second, not when
// the refused instance's figure from Redis runs out (the rest of a day's
// window, minutes of a slow bucket). Two instances, each with its own
// backend (client, gate, batcher) on one Redis: A holds the key's reserve,
// B is refused, A's response costs nothing and refunds all, B admits.
func TestClusterRefusalSeesRefundElsewhere(t *testing.T) {
	srv := redistest.Start(t)
	for name, f := range map[string]rulestore.Fields{
		"token_bucket": {"qps": "0.01", "burst": "10"},
		"calendar":     {"quota": "10", "period": "day", "timezone": "UTC"},
	} {
		t.Run(name, func(t *testing.T) {
			f["key_resolver"] = "global"
			f["response_cost"] = "{http.response.header.X-Tokens-Used}"
			f["reserve"] = "5"
			r := clusterRule(t, f)
			a := instance(t, &testBackend{c: newTestClient(t, srv.Addr), instances: 2}, "refund-"+name)
			b := instance(t, &testBackend{c: newTestClient(t, srv.Addr), instances: 2}, "refund-"+name)
			ea, eb := a.engine(r).(*clusterEngine), b.engine(r).(*clusterEngine)
			key := []byte("k-" + name)
			for i := 0; i < 2; i++ {
				if d := ea.take(r, key, a.now(), r.Cost); !d.OK() || d.Unknown {
					t.Fatalf("A's request %d: %+v, want admitted by Redis", i+1, d)
				}
			}
			d := eb.take(r, key, b.now(), r.Cost)
			if d.Reason != RateLimited || d.RetryAfter < int64(50*time.Second) {
				t.Fatalf("B with the quota reserved by A: %+v, want refused by Redis with a long Retry-After", d)
			}
			calls := counterValue(b.counters.redisCalls)
			// Refused again from memory: the refusal is still remembered,
			// with Redis's figure.
			if d := eb.take(r, key, b.now(), r.Cost); d.Reason != RateLimited || d.RetryAfter < int64(50*time.Second) ||
				counterValue(b.counters.redisCalls) != calls {
				t.Fatalf("B again at once: %+v after %v more Redis calls, want refused from memory", d, counterValue(b.counters.redisCalls)-calls)
			}
			for i := 0; i < 2; i++ {
				if applied, _ := ea.settle(r, key, a.now(), -r.Reserve); !applied {
					t.Fatal("A's refund not applied")
				}
			}
			refunded := time.Now()
			// Generous: the refusal is kept at most clusterRecheck (1 s).
			deadline := refunded.Add(10 * time.Second)
			for {
				d := eb.take(r, key, b.now(), r.Cost)
				if d.OK() && !d.Unknown {
					t.Logf("B admitted %v after A's refund", time.Since(refunded).Round(time.Millisecond))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("B still refuses %v after A refunded the quota: %+v", time.Since(refunded).Round(time.Millisecond), d)
				}
				time.Sleep(20 * time.Millisecond) // sleep: pace the polling; the deadline decides
			}
		})
	}
}
