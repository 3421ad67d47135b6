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

// recorded is a live run of reqs under now, recorded.
type recorded struct {
	reqs   []request
	now    []*engine.Spec
	before []bool
	tr     *Trace
}

func record(now []*engine.Spec, reqs []request) *recorded {
	rec := NewRecorder(DefaultWindow, 1<<20)
	before := live(now, reqs, rec)
	return &recorded{reqs: reqs, now: now, before: before, tr: rec.Snapshot(t0 + span)}
}

// checkReplay runs r's requests live under proposed too, and checks that
// the replay of r's recording gives the live runs' refusals, differences
// and keys.
func checkReplay(t *testing.T, r *recorded, proposed []*engine.Spec) Impact {
	t.Helper()
	reqs, now, before, tr := r.reqs, r.now, r.before, r.tr
	after := live(proposed, reqs, nil)
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
	r := record(one(tokenBucket(2, 10)), traffic(1, 2000, 50_000, t0, span, false))
	same := checkReplay(t, r, one(tokenBucket(2, 10)))
	if same.NewlyRefused != 0 || same.NewlyAllowed != 0 || len(same.Approximate) != 0 {
		t.Errorf("the rule against itself: %+v", same)
	}
	tight := checkReplay(t, r, one(tokenBucket(1, 5)))
	if tight.NewlyRefused == 0 || tight.KeysNewlyRefused == 0 || len(tight.TopKeys) == 0 ||
		!strings.HasPrefix(tight.TopKeys[0].Key, "user:") {
		t.Errorf("tightened: %+v", tight)
	}
	loose := checkReplay(t, r, one(tokenBucket(4, 20)))
	// A looser rule may still refuse a request the rule in force admitted
	// (the key spent earlier): fewer, not none.
	if loose.NewlyAllowed <= loose.NewlyRefused || loose.RefusedProposed >= loose.RefusedNow {
		t.Errorf("loosened: %+v", loose)
	}
}

func TestReplaySlidingWindow(t *testing.T) {
	r := record(one(slidingWindow(60, time.Minute)), traffic(2, 2000, 50_000, t0, span, false))
	checkReplay(t, r, one(slidingWindow(60, time.Minute)))
	checkReplay(t, r, one(slidingWindow(30, time.Minute)))
	checkReplay(t, r, one(slidingWindow(120, time.Minute)))
}

func TestReplayCalendarQuota(t *testing.T) {
	r := record(one(calendarMinute(80)), traffic(3, 2000, 50_000, t0, span, false))
	checkReplay(t, r, one(calendarMinute(80)))
	checkReplay(t, r, one(calendarMinute(40)))
}

func TestReplayCosts(t *testing.T) {
	r := record(one(tokenBucket(5, 20)), traffic(4, 2000, 50_000, t0, span, true))
	checkReplay(t, r, one(tokenBucket(5, 20)))
	checkReplay(t, r, one(tokenBucket(3, 12)))
}

func TestReplayOverrides(t *testing.T) {
	now := tokenBucket(2, 10)
	now.Overrides = map[string]*engine.Limits{"user:0": {QPS: 50, Burst: 100}}
	prop := tokenBucket(2, 10)
	prop.Overrides = map[string]*engine.Limits{"user:0": {QPS: 5, Burst: 10}, "user:1": {QPS: 40, Burst: 80}}
	r := record(one(now), traffic(5, 2000, 50_000, t0, span, false))
	checkReplay(t, r, one(now))
	imp := checkReplay(t, r, one(prop))
	if imp.TopKeys[0].Key != "user:0" {
		t.Errorf("the key whose override fell should lead: %+v", imp.TopKeys)
	}
}

// Several limits on one key: a request passes when every rule admits it.
func TestReplaySeveralLimits(t *testing.T) {
	r := record([]*engine.Spec{tokenBucket(2, 10), slidingWindow(60, time.Minute)}, traffic(6, 2000, 50_000, t0, span, false))
	checkReplay(t, r, []*engine.Spec{tokenBucket(2, 10), slidingWindow(60, time.Minute)})
	checkReplay(t, r, []*engine.Spec{tokenBucket(2, 10), slidingWindow(40, time.Minute)})
	checkReplay(t, r, []*engine.Spec{tokenBucket(3, 10), calendarMinute(50)})
}

// In-flight caps are replayed on the concurrency recorded: exact against
// the rule's own traffic; a tighter cap refuses more, approximately.
func TestReplayInFlightCaps(t *testing.T) {
	capped := func(perKey int32, total int64) *engine.Spec {
		s := tokenBucket(4, 20)
		s.MaxConcurrent, s.MaxConcurrentTotal = perKey, total
		return s
	}
	now := capped(2, 60)
	r := record(one(now), traffic(7, 2000, 50_000, t0, span, false))
	same := checkReplay(t, r, one(capped(2, 60)))
	if same.RefusedNow == 0 || len(same.Approximate) == 0 {
		t.Errorf("capped: %+v", same)
	}
	tight := Replay(r.tr, one(now), one(capped(1, 60)), Options{})
	if tight.NewlyRefused == 0 || tight.RefusedProposed <= tight.RefusedNow {
		t.Errorf("a cap of 1 in flight per key refuses no more: %+v", tight)
	}
}
