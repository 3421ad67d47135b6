package ratelimit

import (
	"context"
	"testing"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// A cluster-state key holding a value no engine can read, with no TTL (a
// damaged write, a stray redis-cli SET), is replaced by fresh state with a
// TTL on its next decision. Before, every decision of that key took
// on_redis_error for as long as the key lived: forever, so with deny a
// 503 per request while Redis was healthy.
func TestClusterUnreadableStateRepairsItself(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	for _, tc := range []struct {
		engine string
		fields rulestore.Fields
		size   int64 // the repaired value's length; 0: a hash
	}{
		{"tb2", rulestore.Fields{"qps": "0.01", "burst": "2"}, 16},
		{"sw2", rulestore.Fields{"qps": "0.002", "window_size": "1000s", "limit_type": "sliding_window"}, 24},
		{"pc", rulestore.Fields{"qps": "0.01", "control_behavior": "pace", "max_queue_wait": "1s"}, 0},
		{"wu", rulestore.Fields{"qps": "10", "burst": "10", "control_behavior": "warm_up", "warm_up_period": "1m"}, 0},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			tc.fields["key_resolver"] = "global"
			tc.fields["on_redis_error"] = "deny"
			r := clusterRule(t, tc.fields)
			key := "t:ratelimit:" + tc.engine + ":{" + r.ID + ":global}"
			for _, bad := range []string{"x", "not a packed state"} {
				srv.Client().Set(ctx, key, bad, 0) // no TTL
				l := instance(t, b, "repair-"+tc.engine)
				if d := take(l, r, "global"); !d.OK() || d.Unknown || d.Reason == RedisUnavailable {
					t.Fatalf("value %q: %+v, want admitted by Redis on fresh state", bad, d)
				}
				if got := counterValue(l.counters.redisErrors); got != 0 {
					t.Errorf("value %q: %v Redis errors, want none", bad, got)
				}
				if ttl := srv.Client().PTTL(ctx, key).Val(); ttl <= 0 {
					t.Errorf("value %q: key TTL %v after the decision, want one", bad, ttl)
				}
				typ := srv.Client().Type(ctx, key).Val()
				switch {
				case tc.size == 0 && typ != "hash":
					t.Errorf("value %q: key type %q after the decision, want hash", bad, typ)
				case tc.size > 0 && srv.Client().StrLen(ctx, key).Val() != tc.size:
					t.Errorf("value %q: %d bytes after the decision, want %d", bad, srv.Client().StrLen(ctx, key).Val(), tc.size)
				}
			}
		})
	}
}
