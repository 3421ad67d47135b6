package ratelimit

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// A rolling upgrade from the previous release (whose cluster state was a
// hash per key, testdata/state-v1) runs both builds against one Redis, on
// the same rules and keys. Their formats must never meet: the previous
// release's script, given a key of ours, answered WRONGTYPE and so its
// on_redis_error, for as long as we kept the key alive; and we, given its
// hash, started the key afresh on every meeting. Here the previous
// release's script, verbatim, and this build's engine take turns on one
// key: each is refused exactly beyond its own quota, with no error on
// either side (so during an upgrade a key is allowed at most its quota
// per build, and never denied by the clash).
func TestClusterRollingUpgradeKeepsFormatsApart(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	const quota = 5
	for _, tc := range []struct {
		engine, script string
		fields         rulestore.Fields
	}{
		{"tb", "tokenbucket.lua", rulestore.Fields{"qps": "0.001", "burst": "5"}},
		// A window of 1e6 s: no window boundary falls inside the test.
		{"sw", "slidingwindow.lua", rulestore.Fields{"qps": "0.000005", "window_size": "1000000s", "limit_type": "sliding_window"}},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			src, err := os.ReadFile("testdata/state-v1/" + tc.script)
			if err != nil {
				t.Fatal(err)
			}
			tc.fields["key_resolver"] = "global"
			tc.fields["on_redis_error"] = "deny"
			r := clusterRule(t, tc.fields)
			l := r.LimitsFor([]byte("global"))
			oldKey := b.KeyPrefix() + "ratelimit:" + tc.engine + ":{" + r.ID + ":global}"
			old := func() int64 {
				t.Helper()
				res, err := srv.Client().Eval(ctx, string(src), []string{oldKey}, 1, l.ScriptArgs[0], l.ScriptArgs[1], 1, 1).Slice()
				if err != nil {
					t.Fatalf("previous release's script: %v", err)
				}
				if len(res) != 4 {
					t.Fatalf("previous release's script: reply %v, want 4 values", res)
				}
				n, ok := res[0].(int64)
				if !ok {
					t.Fatalf("previous release's script: %v, want a decision (it takes on_redis_error on this)", res[0])
				}
				return n
			}
			inst := instance(t, b, "upgrade-"+tc.engine)
			oldAllowed, newAllowed := 0, 0
			for i := range 2 * quota {
				// Each build goes first in turn: the old one then meets
				// what the new one just wrote, and the other way round.
				for _, first := range []bool{i%2 == 0, i%2 != 0} {
					if first {
						got, want := old(), int64(0)
						if oldAllowed < quota {
							want = 1
						}
						if got != want {
							t.Fatalf("previous release, request %d: granted %d, want %d (%d of quota %d allowed so far)", i+1, got, want, oldAllowed, quota)
						}
						oldAllowed += int(got)
						continue
					}
					d := take(inst, r, "global")
					if d.Unknown || d.Reason == RedisUnavailable {
						t.Fatalf("this build, request %d: %+v, want decided by Redis (not on_redis_error)", i+1, d)
					}
					if want := newAllowed < quota; d.OK() != want {
						t.Fatalf("this build, request %d: %+v, want allowed=%v (%d of quota %d allowed so far)", i+1, d, want, newAllowed, quota)
					}
					if d.OK() {
						newAllowed++
					}
				}
			}
			if oldAllowed != quota || newAllowed != quota {
				t.Errorf("allowed %d by the previous release and %d by this build, want %d each", oldAllowed, newAllowed, quota)
			}
			if got := counterValue(inst.counters.redisErrors); got != 0 {
				t.Errorf("this build: %v Redis errors, want none", got)
			}
			if typ := srv.Client().Type(ctx, oldKey).Val(); typ != "hash" {
				t.Errorf("previous release's key %s: type %q, want its hash", oldKey, typ)
			}
		})
	}
}

// The pace schedule kept its name and format (a hash {p} at pc), so during
// an upgrade both builds reserve slots in one schedule: at 0.1 qps with
// max_queue_wait 25s, three slots (0, 10 s, 20 s) between them, whichever
// asks, then both refuse.
func TestClusterRollingUpgradeSharesPaceSchedule(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := &testBackend{c: newTestClient(t, srv.Addr), instances: 2}
	src, err := os.ReadFile("testdata/state-v1/pace.lua")
	if err != nil {
		t.Fatal(err)
	}
	r := clusterRule(t, rulestore.Fields{"qps": "0.1", "control_behavior": "pace", "max_queue_wait": "25s", "key_resolver": "global", "on_redis_error": "deny"})
	key := b.KeyPrefix() + "ratelimit:pc:{" + r.ID + ":global}"
	old := func() int64 {
		t.Helper()
		// paceLua's ARGV: interval µs (cost/qps), max_queue_wait µs.
		res, err := srv.Client().Eval(ctx, string(src), []string{key}, 10e6, 25e6).Int64Slice()
		if err != nil || len(res) != 4 {
			t.Fatalf("previous release's pace script: %v %v, want a decision", res, err)
		}
		return res[0]
	}
	inst := instance(t, b, "upgrade-pc")
	newTake := func() bool {
		t.Helper()
		d := inst.engine(r).Take(r, []byte("global"), inst.now())
		if d.Unknown || d.Reason == RedisUnavailable {
			t.Fatalf("this build: %+v, want decided by Redis", d)
		}
		if d.Queued != nil {
			d.Queued.Add(-1) // what waitTurn does when the wait ends
		}
		inst.engine(r).Release(&d)
		return d.OK()
	}
	got := []bool{newTake(), old() == 1, newTake(), old() == 1, newTake()}
	if want := []bool{true, true, true, false, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("slots granted new, old, new, old, new: %v, want %v (three slots in one schedule)", got, want)
	}
	if got := counterValue(inst.counters.redisErrors); got != 0 {
		t.Errorf("this build: %v Redis errors, want none", got)
	}
}
