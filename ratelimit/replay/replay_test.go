package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

const (
	t0   = int64(1e12)
	span = int64(590 * time.Second) // inside the recorder's 10 minutes
)

// within reports whether got is within 1 % of want (and one request, for
// counts near zero).
func within(got, want int64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= 1+want/100
}

// checkReplay runs reqs live under now while recording, runs them live
// under proposed too, and checks that the replay of the recording gives
// the live runs' refusals, differences and keys.
func checkReplay(t *testing.T, now, proposed []*engine.Spec, reqs []request) Impact {
	t.Helper()
	rec := NewRecorder(DefaultWindow, 1<<20)
	before := live(now, reqs, rec)
	after := live(proposed, reqs, nil)
	tr := rec.Snapshot(t0 + span)
	for i := range tr.Shards {
		if tr.Shards[i].Level != 0 {
			t.Fatalf("shard %d sampled at level %d: the test wants every record", i, tr.Shards[i].Level)
		}
	}
	imp := Replay(tr, now, proposed, Options{})
	refBefore, refAfter, newlyRefused, newlyAllowed := direct(before, after)
	if imp.Requests != int64(len(reqs)) || imp.RefusedRecorded != refBefore {
		t.Fatalf("recorded %d requests, %d refused; ran %d, %d refused", imp.Requests, imp.RefusedRecorded, len(reqs), refBefore)
	}
	if refBefore == 0 || refBefore == int64(len(reqs)) {
		t.Fatalf("the rule in force refused %d of %d: the test wants both outcomes", refBefore, len(reqs))
	}
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"refused_now", imp.RefusedNow, refBefore},
		{"refused_proposed", imp.RefusedProposed, refAfter},
		{"newly_refused", imp.NewlyRefused, newlyRefused},
		{"newly_allowed", imp.NewlyAllowed, newlyAllowed},
	} {
		if !within(c.got, c.want) {
			t.Errorf("%s: replay %d, live %d (of %d requests)", c.name, c.got, c.want, len(reqs))
		}
	}
	keys := perKey(reqs, before, after)
	var keysRefused int64
	for _, k := range keys {
		if k[0] > 0 {
			keysRefused++
		}
	}
	if !within(imp.KeysNewlyRefused, keysRefused) {
		t.Errorf("keys_newly_refused: replay %d, live %d", imp.KeysNewlyRefused, keysRefused)
	}
	for _, k := range imp.TopKeys {
		want := keys[k.Key]
		if !within(k.NewlyRefused, want[0]) || !within(k.NewlyAllowed, want[1]) {
			t.Errorf("top key %q: replay %d refused %d allowed, live %v", k.Key, k.NewlyRefused, k.NewlyAllowed, want)
		}
	}
	return imp
}

// perKey counts, by key, the requests newly refused and newly allowed.
func perKey(reqs []request, before, after []bool) map[string][2]int64 {
	m := make(map[string][2]int64)
	for i, q := range reqs {
		k := m[string(q.key)]
		if before[i] && !after[i] {
			k[0]++
		}
		if !before[i] && after[i] {
			k[1]++
		}
		if k != [2]int64{} {
			m[string(q.key)] = k
		}
	}
	return m
}

func one(s *engine.Spec) []*engine.Spec { return []*engine.Spec{s} }

func TestReplayTokenBucket(t *testing.T) {
	reqs := traffic(1, 2000, 80_000, t0, span, false)
	now := tokenBucket(2, 10)
	same := checkReplay(t, one(now), one(tokenBucket(2, 10)), reqs)
	if same.NewlyRefused != 0 || same.NewlyAllowed != 0 || len(same.Approximate) != 0 {
		t.Errorf("the rule against itself: %+v", same)
	}
	tight := checkReplay(t, one(now), one(tokenBucket(1, 5)), reqs)
	if tight.NewlyRefused == 0 || tight.KeysNewlyRefused == 0 || len(tight.TopKeys) == 0 ||
		!strings.HasPrefix(tight.TopKeys[0].Key, "user:") {
		t.Errorf("tightened: %+v", tight)
	}
	loose := checkReplay(t, one(now), one(tokenBucket(4, 20)), reqs)
	// A looser rule may still refuse a request the rule in force admitted
	// (the key spent earlier): fewer, not none.
	if loose.NewlyAllowed <= loose.NewlyRefused || loose.RefusedProposed >= loose.RefusedNow {
		t.Errorf("loosened: %+v", loose)
	}
}

func TestReplaySlidingWindow(t *testing.T) {
	reqs := traffic(2, 2000, 80_000, t0, span, false)
	now := slidingWindow(60, time.Minute)
	checkReplay(t, one(now), one(slidingWindow(60, time.Minute)), reqs)
	checkReplay(t, one(now), one(slidingWindow(30, time.Minute)), reqs)
	checkReplay(t, one(now), one(slidingWindow(120, time.Minute)), reqs)
}

func TestReplayCalendarQuota(t *testing.T) {
	reqs := traffic(3, 2000, 80_000, t0, span, false)
	checkReplay(t, one(calendarMinute(80)), one(calendarMinute(80)), reqs)
	checkReplay(t, one(calendarMinute(80)), one(calendarMinute(40)), reqs)
}

func TestReplayCosts(t *testing.T) {
	reqs := traffic(4, 2000, 80_000, t0, span, true)
	checkReplay(t, one(tokenBucket(5, 20)), one(tokenBucket(5, 20)), reqs)
	checkReplay(t, one(tokenBucket(5, 20)), one(tokenBucket(3, 12)), reqs)
}

func TestReplayOverrides(t *testing.T) {
	reqs := traffic(5, 2000, 80_000, t0, span, false)
	now := tokenBucket(2, 10)
	now.Overrides = map[string]*engine.Limits{"user:0": {QPS: 50, Burst: 100}}
	prop := tokenBucket(2, 10)
	prop.Overrides = map[string]*engine.Limits{"user:0": {QPS: 5, Burst: 10}, "user:1": {QPS: 40, Burst: 80}}
	checkReplay(t, one(now), one(now), reqs)
	imp := checkReplay(t, one(now), one(prop), reqs)
	if imp.TopKeys[0].Key != "user:0" {
		t.Errorf("the key whose override fell should lead: %+v", imp.TopKeys)
	}
}

// Several limits on one key: a request passes when every rule admits it.
func TestReplaySeveralLimits(t *testing.T) {
	reqs := traffic(6, 2000, 80_000, t0, span, false)
	now := []*engine.Spec{tokenBucket(2, 10), slidingWindow(60, time.Minute)}
	checkReplay(t, now, []*engine.Spec{tokenBucket(2, 10), slidingWindow(60, time.Minute)}, reqs)
	checkReplay(t, now, []*engine.Spec{tokenBucket(2, 10), slidingWindow(40, time.Minute)}, reqs)
	checkReplay(t, now, []*engine.Spec{tokenBucket(3, 10), calendarMinute(50)}, reqs)
}

// In-flight caps are replayed on the concurrency recorded: exact against
// the rule's own traffic; a tighter cap refuses more, approximately.
func TestReplayInFlightCaps(t *testing.T) {
	reqs := traffic(7, 2000, 80_000, t0, span, false)
	capped := func(perKey int32, total int64) *engine.Spec {
		s := tokenBucket(4, 20)
		s.MaxConcurrent, s.MaxConcurrentTotal = perKey, total
		return s
	}
	now := capped(2, 60)
	same := checkReplay(t, one(now), one(capped(2, 60)), reqs)
	if same.RefusedNow == 0 || len(same.Approximate) == 0 {
		t.Errorf("capped: %+v", same)
	}
	rec := NewRecorder(DefaultWindow, 1<<20)
	live(one(now), reqs, rec)
	tight := Replay(rec.Snapshot(t0+span), one(now), one(capped(1, 60)), Options{})
	if tight.NewlyRefused == 0 || tight.RefusedProposed <= tight.RefusedNow {
		t.Errorf("a cap of 1 in flight per key refuses no more: %+v", tight)
	}
}
