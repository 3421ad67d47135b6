package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
)

// noonTomorrow is an engine time at noon UTC tomorrow: a flood of fake
// time from there stays in one calendar day whenever the test runs.
func noonTomorrow() int64 {
	return engineAt(time.Now().UTC().Truncate(24 * time.Hour).Add(36 * time.Hour))
}

// flood takes one request each for n distinct junk keys from now on, 1µs
// apart, and returns the time after.
func flood(e *localEngine, r *Rule, n int, now int64) int64 {
	key := make([]byte, 0, 32)
	for i := range n {
		now += int64(time.Microsecond)
		key = fmt.Appendf(key[:0], "junk-%d", i)
		e.Take(r, key, now)
	}
	return now
}

// tracked reports whether the engine's table holds key.
func tracked(e *localEngine, key string) bool {
	_, ok := e.Peek([]byte(key))
	return ok
}

// evictRules are, per engine, a rule whose key "spent" has spent its
// whole quota of 1,000 and is 5,398 past it (a response_cost debt), with
// max_keys 1,000: a flood of junk keys evicts it.
func evictRules() map[string]rulestore.Fields {
	rc := func(f rulestore.Fields) rulestore.Fields {
		f["response_cost"] = "{http.response.header.X-Tokens-Used}"
		f["reserve"] = "1"
		f["max_keys"] = "1000"
		return f
	}
	return map[string]rulestore.Fields{
		"token_bucket":   rc(rulestore.Fields{"qps": "0.01", "burst": "1000"}),
		"sliding_window": rc(rulestore.Fields{"limit_type": "sliding_window", "qps": "1", "window_size": "1000"}),
		"calendar":       rc(rulestore.Fields{"quota": "1000", "period": "day", "timezone": "UTC"}),
	}
}

// A key evicted by a flood of junk keys comes back owing what it owed:
// refused, its debt kept.
func TestEvictionKeepsSpentQuotaAndDebt(t *testing.T) {
	for typ, f := range evictRules() {
		t.Run(typ, func(t *testing.T) {
			r := mustRule(t, f)
			e := newLocalEngine(r)
			key := []byte("spent")
			now := noonTomorrow()
			if d := e.take(r, key, now, 1); !d.OK() {
				t.Fatalf("first request refused: %+v", d)
			}
			e.settle(r, key, now, 6398-1) // used 6,398 of 1,000
			now = flood(e, r, 100_000, now)
			if tracked(e, "spent") {
				t.Fatalf("the flood did not evict the spent key (%d keys tracked)", e.Keys())
			}
			if n := e.Keys(); n > int64(r.MaxKeys) {
				t.Fatalf("tracking %d keys > max_keys %d", n, r.MaxKeys)
			}
			if d := e.Take(r, key, now); d.OK() {
				t.Fatalf("evicted spent key admitted again: remaining %d", d.Remaining)
			}
			// Back in the table: what it holds is its debt, or more.
			var ent engine.Snapshot
			if ent, _ = e.Peek(key); !tracked(e, "spent") {
				t.Fatal("the refused key is not tracked")
			}
			bal := ent.Balance(&r.Spec, &r.Limits, now, r.windowStartOr0(now))
			t.Logf("balance after eviction and return: %.3f (was -5398)", bal)
			if bal > -5398+0.01 {
				t.Fatalf("balance %.3f after eviction, want at most -5398 (the debt kept)", bal)
			}
		})
	}
}

// windowStartOr0 is a calendar rule's window start at now, else 0.
func (r *Rule) windowStartOr0(now int64) int64 {
	if r.Calendar == nil {
		return 0
	}
	return r.Calendar.Window(engine.Wall(now)).Start
}

// Eviction takes a key whose state is a fresh one's before a spent key
// colder than it: nothing is lost.
func TestEvictionTakesFreshKeysFirst(t *testing.T) {
	// One stripe of 64 keys; qps 1, burst 10.
	r := mustRule(t, rulestore.Fields{"qps": "1", "burst": "10", "max_keys": "64"})
	e := newLocalEngine(r)
	now := noonTomorrow()
	spent := []byte("spent")
	e.take(r, spent, now, 10) // full again in 10s
	for i := range 63 {
		e.Take(r, fmt.Appendf(nil, "light-%d", i), now) // full again in 1s
	}
	now += 2 * sec // the light keys are fresh again, the spent one is not
	for i := range 63 {
		e.Take(r, fmt.Appendf(nil, "new-%d", i), now)
		if !tracked(e, "spent") {
			t.Fatalf("new key %d evicted the spent key while fresh keys were there", i)
		}
	}
}

// After a flood of junk keys ten times max_keys, a new key is almost never
// refused for what other keys left, and starts with little charged: a
// key's cells hold what the keys sharing them left, and a junk key that
// comes in with some of that leaves it again, so the charge grows with
// the flood (about 0.6 units per max_keys of junk keys here).
func TestEvictionRarelyChargesNewKeys(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"quota": "1000", "period": "day", "timezone": "UTC", "max_keys": "1000"})
	e := newLocalEngine(r)
	now := noonTomorrow()
	// 100 keys (a tenth of max_keys) spend their whole quota and are
	// evicted among the flood.
	for i := range 100 {
		e.take(r, fmt.Appendf(nil, "spent-%d", i), now, 1000)
	}
	now = flood(e, r, 10*r.MaxKeys, now)
	const probes = 10_000
	refused, charged, most := 0, 0.0, 0.0
	for i := range probes {
		d := e.Take(r, fmt.Appendf(nil, "new-%d", i), now)
		if !d.OK() {
			refused++
			continue
		}
		c := 1000 - 1 - float64(d.Remaining)
		charged += c
		most = max(most, c)
	}
	rate := float64(refused) / probes
	mean := charged / float64(probes-refused)
	t.Logf("new keys after a flood of %d junk keys: %d of %d refused (%.2f%%); the admitted start %.2f units charged on average, %.0f at most",
		10*r.MaxKeys, refused, probes, 100*rate, mean, most)
	if rate > 0.01 {
		t.Fatalf("%.2f%% of new keys refused, want at most 1%%", 100*rate)
	}
	if mean > 20 || most > 50 {
		t.Fatalf("new keys start %.2f units charged on average, %.0f at most; want at most 20 and 50 of 1000", mean, most)
	}
}

// A million junk keys against the default max_keys (100,000): a key that
// spent its calendar quota of 1,000 is still refused, a token bucket's
// 5,398 tokens of debt are still owed, the table holds at most max_keys
// and the sketches their fixed size.
func TestMillionJunkKeysForgiveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("a million keys")
	}
	for _, typ := range []string{"calendar", "token_bucket"} {
		t.Run(typ, func(t *testing.T) {
			f := rulestore.Fields{"quota": "1000", "period": "day", "timezone": "UTC"}
			if typ == "token_bucket" {
				// 1,000 a day, as a bucket.
				f = rulestore.Fields{"qps": fmt.Sprint(1000.0 / 86400), "burst": "1000"}
			}
			f["response_cost"] = "{http.response.header.X-Tokens-Used}"
			f["reserve"] = "1"
			r := mustRule(t, f)
			e := newLocalEngine(r)
			key := []byte("spent")
			now := noonTomorrow()
			e.take(r, key, now, 1)
			e.settle(r, key, now, 6398-1) // 5,398 past the quota
			now = flood(e, r, 1_000_000, now)
			if tracked(e, "spent") {
				t.Fatal("a million junk keys did not evict the spent key")
			}
			keys := e.Keys()
			sketch, most := e.Table().SketchBytes(r.MaxKeys)
			if keys > int64(r.MaxKeys) || sketch > most {
				t.Fatalf("%d keys tracked (max_keys %d), sketches %d bytes (at most %d)", keys, r.MaxKeys, sketch, most)
			}
			ent, _ := e.peekTrace(r, key, now)
			bal := ent.Balance(&r.Spec, &r.Limits, now, r.windowStartOr0(now))
			if d := e.Take(r, key, now); d.OK() {
				t.Fatalf("evicted spent key admitted again: remaining %d", d.Remaining)
			}
			if bal > -5398+1 {
				t.Fatalf("balance %.3f after the flood, want at most -5397 (the debt, less 1s of refill)", bal)
			}
			// New keys after the flood: the junk keys, each a request,
			// left no trace, so new keys keep their whole quota.
			refused, charged := 0, 0.0
			const probes = 10_000
			for i := range probes {
				d := e.Take(r, fmt.Appendf(nil, "new-%d", i), now)
				if !d.OK() {
					refused++
					continue
				}
				charged += 999 - float64(d.Remaining)
			}
			mean := charged / float64(probes-refused)
			t.Logf("after 1,000,000 junk keys: %d keys tracked (max_keys %d), sketches %d bytes; spent key's balance %.1f; new keys %d of %d refused, %.2f units charged on average",
				keys, r.MaxKeys, sketch, bal, refused, probes, mean)
			if refused != 0 || mean >= 1 {
				t.Fatalf("new keys: %d of %d refused, %.2f charged on average; want none refused and less than one unit", refused, probes, mean)
			}
		})
	}
}
