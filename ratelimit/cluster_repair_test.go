package ratelimit

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/ratelimit/engine"
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

// packed is a state value as the scripts write it (struct.pack '<d…').
func packed(vals ...float64) string {
	b := make([]byte, 0, 8*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return string(b)
}

// badStates are values of the right length (or, for a calendar count, a
// number) that no engine writes, at time now (µs, Redis's clock), and
// what the key's decisions must do with them: fresh, admitted at once
// with no more than the quota left; recovers, the time is taken as now
// and the key is admitted once it refilled (or its window moved on)
// from there.
func badStates(now float64) map[string][]struct {
	name, value string
	recovers    bool
} {
	type bad = struct {
		name, value string
		recovers    bool
	}
	nan, inf := math.NaN(), math.Inf(1)
	future := now + 365*86400e6
	return map[string][]bad{
		"tb2": {
			{"NaN tokens", packed(now, nan), false},
			{"-inf tokens", packed(now, -inf), false},
			{"NaN time", packed(nan, 0), false},
			{"-inf time", packed(-inf, 0), false},
			{"debt of 1e300", packed(now, -1e300), false},
			{"time a year ahead", packed(future, 0), true},
			{"+inf time", packed(inf, 0), true},
		},
		"sw2": {
			{"NaN count", packed(now-math.Mod(now, 1e6), nan, 0), false},
			{"+inf count", packed(now-math.Mod(now, 1e6), inf, 0), false},
			{"negative count", packed(now-math.Mod(now, 1e6), -1e9, 0), false},
			{"NaN previous", packed(now-math.Mod(now, 1e6), 0, nan), false},
			{"-inf start", packed(-inf, 2, 2), false},
			{"window a year ahead", packed(future-math.Mod(future, 1e6), 2, 0), true},
		},
		"cq": {
			{"nan", "nan", false},
			{"inf", "inf", false},
			{"-inf", "-inf", false},
			{"negative", "-5", false},
			{"1e300", "1e300", false},
		},
	}
}

// Values of the right length holding numbers no engine writes (NaN, ±inf,
// a time far ahead, a count below zero or a debt no settlement runs up)
// are replaced on read, by fresh state or, for a time ahead, the counts
// taken as of now: the key is decided by Redis at once (or once it
// refilled from now), never for good refused, and no answer has less
// than 0 or more than the quota left. Before, such a value refused a key
// until it idled out (never, for a hot key; -inf, never at all).
func TestClusterInvalidStateNumbersRepair(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	rules := map[string]rulestore.Fields{
		"tb2": {"qps": "10", "burst": "2"},
		"sw2": {"qps": "2", "window_size": "1s", "limit_type": "sliding_window"},
		"cq":  {"quota": "2", "period": "day", "timezone": "UTC"},
	}
	tm := srv.Client().Time(ctx).Val()
	for kind, cases := range badStates(float64(tm.UnixMicro())) {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				f := rulestore.Fields{"key_resolver": "global", "on_redis_error": "deny"}
				for k, v := range rules[kind] {
					f[k] = v
				}
				r := clusterRule(t, f)
				l := instance(t, b, "invalid-"+kind)
				key := "t:ratelimit:" + kind + ":{" + r.ID + ":global}"
				if kind == "cq" {
					key = cluster.CalendarRedisKey("t:", r.ID, []byte("global"), r.Calendar.Window(engine.Wall(l.now())).Start)
				}
				srv.Client().Set(ctx, key, tc.value, 0) // a hot key: its TTL would never run out
				deadline := time.Now().Add(10 * time.Second)
				for {
					d := take(l, r, "global")
					if d.Unknown || d.Remaining < 0 || d.Remaining >= 2 {
						t.Fatalf("value %q: %+v, want decided by Redis with 0 or 1 left of 2", tc.value, d)
					}
					if d.OK() {
						break
					}
					if !tc.recovers {
						t.Fatalf("value %q: %+v, want admitted at once on fresh state", tc.value, d)
					}
					if time.Now().After(deadline) {
						t.Fatalf("value %q: still refused after 10s: %+v", tc.value, d)
					}
					time.Sleep(20 * time.Millisecond) // sleep: pace the polling; the deadline decides
				}
				if got := counterValue(l.counters.redisErrors); got != 0 {
					t.Errorf("value %q: %v Redis errors, want none", tc.value, got)
				}
				if ttl := srv.Client().PTTL(ctx, key).Val(); ttl <= 0 {
					t.Errorf("value %q: key TTL %v after the decision, want one", tc.value, ttl)
				}
			})
		}
	}
}

// A settlement reads the key's state with the same checks as a decision:
// charged on a value holding NaN or ±inf, the key is left with finite
// numbers (fresh state charged), never with the bad value written back.
func TestClusterSettleInvalidStateNumbersRepair(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	now := float64(srv.Client().Time(ctx).Val().UnixMicro())
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		engine string
		fields rulestore.Fields
		values []string
	}{
		{"tb2", rulestore.Fields{"qps": "0.01", "burst": "10"}, []string{packed(now, nan), packed(now, -inf), packed(nan, 5)}},
		{"sw2", rulestore.Fields{"qps": "0.01", "window_size": "1000s", "limit_type": "sliding_window"},
			[]string{packed(now-math.Mod(now, 1000e6), nan, 0), packed(now-math.Mod(now, 1000e6), inf, 0), packed(now-math.Mod(now, 1000e6), 0, -inf)}},
		{"cq", rulestore.Fields{"quota": "10", "period": "day", "timezone": "UTC"}, []string{"nan", "inf", "-inf"}},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			tc.fields["key_resolver"] = "global"
			tc.fields["response_cost"] = "{http.response.header.X-Tokens-Used}"
			tc.fields["reserve"] = "1"
			r := clusterRule(t, tc.fields)
			l := instance(t, b, "settle-invalid-"+tc.engine)
			e := l.engine(r).(*clusterEngine)
			key := "t:ratelimit:" + tc.engine + ":{" + r.ID + ":global}"
			if tc.engine == "cq" {
				key = cluster.CalendarRedisKey("t:", r.ID, []byte("global"), r.Calendar.Window(engine.Wall(l.now())).Start)
			}
			for _, v := range tc.values {
				srv.Client().Set(ctx, key, v, 0)
				if applied, _ := e.settle(r, []byte("global"), l.now(), 1); !applied {
					t.Fatalf("value %q: settlement not applied", v)
				}
				got := srv.Client().Get(ctx, key).Val()
				var nums []float64
				if tc.engine == "cq" {
					n, err := strconv.ParseFloat(got, 64)
					if err != nil {
						t.Fatalf("value %q: count %q after the charge: %v", v, got, err)
					}
					nums = []float64{n}
				} else {
					for i := 0; i+8 <= len(got); i += 8 {
						nums = append(nums, f64le([]byte(got[i:i+8])))
					}
				}
				for _, n := range nums {
					if math.IsNaN(n) || math.IsInf(n, 0) || n < -1 {
						t.Fatalf("value %q: state %v after a charge of 1, want finite numbers of a fresh state charged", v, nums)
					}
				}
			}
		})
	}
}
