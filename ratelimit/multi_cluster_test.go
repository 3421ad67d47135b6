package ratelimit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// On a real Redis Cluster, a token bucket, a sliding window and a calendar
// quota keyed alike keep a key's state in one slot, so one script decides
// a request under all three: 64 concurrent requests per key over two
// instances (each its own client and limiters), the calendar quota refusing
// after 8. Exactly 8 pass per key, and the other two rules spent exactly
// those 8: none of the 56 refused took a token anywhere.
func TestSeveralLimitsOneScriptOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	rules := []*Rule{
		clusterRule(t, rulestore.Fields{"qps": "0.0001", "burst": "100", "key_resolver": "userId"}),
		clusterRule(t, rulestore.Fields{"qps": "0.00005", "window_size": "1000000s", "limit_type": "sliding_window", "key_resolver": "userId"}),
		clusterRule(t, rulestore.Fields{"quota": "8", "period": "day", "key_resolver": "userId"}),
	}
	for _, r := range rules {
		r.RedisTimeout = 10 * time.Second // counting, not timing
	}
	var insts [2][]*limiter
	for i := range insts {
		b := &testBackend{c: newTestClient(t, cl.Addrs()...), instances: 2}
		for _, r := range rules {
			insts[i] = append(insts[i], instance(t, b, r.ID))
		}
	}
	keys := []string{"alice", "bob", "carol"}
	for _, k := range keys {
		b := insts[0][0].backend.Load().b
		slot := keySlot(redisKey(b.KeyPrefix(), TokenBucket, rules[0].ID, []byte(k)))
		if s := keySlot(calendarRedisKey(b.KeyPrefix(), rules[2].ID, []byte(k), 0)); s != slot {
			t.Fatalf("%s: the calendar window's slot %d, the bucket's %d: want one slot", k, s, slot)
		}
	}
	var admitted [3]atomic.Int64
	var unhandled atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for ki, k := range keys {
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ts := make([]taken, len(rules))
				for j, r := range rules {
					lim := insts[i%2][j]
					ts[j] = taken{m: member{rule: r, lim: lim}, eng: lim.engine(r), kto: len(k), cost: 1}
				}
				refused, handled := decideAtomic(ts, []byte(k))
				if !handled {
					unhandled.Add(1)
					return
				}
				if refused < 0 {
					admitted[ki].Add(1)
					release(ts)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if n := unhandled.Load(); n != 0 {
		t.Fatalf("%d requests not decided by one script", n)
	}
	for ki, k := range keys {
		if n := admitted[ki].Load(); n != 8 {
			t.Errorf("%s: %d of 64 admitted, want the calendar quota's 8", k, n)
		}
		// One more request on each rule alone: what Redis has left.
		for j, want := range []int64{100 - 8 - 1, 50 - 8 - 1} {
			if d := take(insts[0][j], rules[j], k); !d.OK() || d.Remaining != want {
				t.Errorf("%s, rule %d alone: %+v, want admitted with %d remaining (only the 8 admitted spent)", k, j, d, want)
			}
		}
	}
}
