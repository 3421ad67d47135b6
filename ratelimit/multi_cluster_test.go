package ratelimit

import (
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// On a real Redis Cluster each rule's state of a key lies in its own slot
// (tagged by rule and key, where earlier releases kept it), so one script
// cannot decide a request under several limits: decideAtomic says so and
// takes nothing, and the caller decides rule by rule (take-then-refund,
// TestSeveralLimitsClusterNoLeak). Checked for three keys over a token
// bucket, a sliding window and a calendar quota: not handled, and each
// rule alone then finds its whole quota.
func TestSeveralLimitsOnRedisClusterFallBackRuleByRule(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	rules := []*Rule{
		clusterRule(t, rulestore.Fields{"qps": "0.0001", "burst": "100", "key_resolver": "userId"}),
		clusterRule(t, rulestore.Fields{"qps": "0.00005", "window_size": "1000000s", "limit_type": "sliding_window", "key_resolver": "userId"}),
		clusterRule(t, rulestore.Fields{"quota": "8", "period": "day", "key_resolver": "userId"}),
	}
	for i, r := range rules {
		r.ID = []string{"per_second", "per_window", "per_day"}[i]
		r.RedisTimeout = 10 * time.Second // counting, not timing
	}
	b := &testBackend{c: newTestClient(t, cl.Addrs()...), instances: 1}
	var lims []*limiter
	for _, r := range rules {
		lims = append(lims, instance(t, b, r.ID))
	}
	for _, k := range []string{"alice", "bob", "carol"} {
		ts := make([]taken, len(rules))
		for j, r := range rules {
			ts[j] = taken{m: member{rule: r, lim: lims[j]}, eng: lims[j].engine(r), kto: len(k), cost: 1}
		}
		if _, handled := decideAtomic(ts, []byte(k)); handled {
			t.Fatalf("%s: decided by one script across Redis Cluster slots", k)
		}
		for j, want := range []int64{100 - 1, 50 - 1, 8 - 1} {
			if d := take(lims[j], rules[j], k); !d.OK() || d.Remaining != want {
				t.Errorf("%s, rule %d alone: %+v, want admitted with %d remaining (nothing taken by the declined script)", k, j, d, want)
			}
		}
	}
}
