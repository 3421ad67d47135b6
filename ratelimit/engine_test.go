package ratelimit

import (
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

const sec = int64(time.Second)

func mustRule(t testing.TB, f rulestore.Fields) *Rule {
	t.Helper()
	r, err := ParseRule("t", f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTokenBucketBurstRefillCostRetryAfter(t *testing.T) {
	var b tokenBucket
	now := 10 * sec
	// qps 2, burst 5: exactly 5 pass at one instant.
	for i := 0; i < 5; i++ {
		if ok, left, _ := b.take(now, 2, 5, 1); !ok || left != float64(4-i) {
			t.Fatalf("take %d: ok=%v left=%v", i, ok, left)
		}
	}
	ok, _, wait := b.take(now, 2, 5, 1)
	if ok || wait != sec/2 {
		t.Fatalf("6th: ok=%v wait=%v, want refused with 500ms wait", ok, time.Duration(wait))
	}
	// After 499ms still no token; at 500ms one.
	if ok, _, _ := b.take(now+sec/2-int64(time.Millisecond), 2, 5, 1); ok {
		t.Fatal("admitted before refill")
	}
	if ok, _, _ := b.take(now+sec/2, 2, 5, 1); !ok {
		t.Fatal("not admitted after refill")
	}
	// requested_tokens 3 on an empty bucket: wait for 3 tokens = 1.5s.
	ok, _, wait = b.take(now+sec/2, 2, 5, 3)
	if ok || wait != 3*sec/2 {
		t.Fatalf("cost 3: ok=%v wait=%v, want 1.5s", ok, time.Duration(wait))
	}
	// A long idle period refills to burst, never beyond.
	if ok, left, _ := b.take(now+100*sec, 2, 5, 3); !ok || left != 2 {
		t.Fatalf("after idle: ok=%v left=%v, want 2 left", ok, left)
	}
	if got := b.untilFull(2, 5); got != 3*sec/2 {
		t.Fatalf("untilFull %v", time.Duration(got))
	}
}

func TestTokenBucketRateOverTime(t *testing.T) {
	var b tokenBucket
	admitted := 0
	// 10 s of a request every millisecond against qps 100 burst 10.
	for ms := int64(1); ms <= 10_000; ms++ {
		if ok, _, _ := b.take(sec+ms*int64(time.Millisecond), 100, 10, 1); ok {
			admitted++
		}
	}
	if admitted < 1000 || admitted > 1010 {
		t.Fatalf("admitted %d in 10s at qps 100 burst 10, want 1000..1010", admitted)
	}
}

func TestSlidingWindowBoundary(t *testing.T) {
	var w slidingWindow
	size := 10 * sec
	start := 100 * sec
	// 10 per 10s window, all at the start of a window.
	for i := 0; i < 10; i++ {
		if ok, _, _ := w.take(start, size, 10, 1); !ok {
			t.Fatalf("take %d refused", i)
		}
	}
	ok, left, wait := w.take(start+sec, size, 10, 1)
	if ok || left != 0 {
		t.Fatal("11th admitted")
	}
	// The next window starts at 110s with prev=10, weight 1: at 111s the
	// weight is 0.9, estimate 9, and one fits: 10s after 101s.
	if want := 10 * sec; wait != want {
		t.Fatalf("wait %v, want %v", time.Duration(wait), time.Duration(want))
	}
	if ok, _, _ := w.take(start+sec+wait-1, size, 10, 1); ok {
		t.Fatal("admitted before the wait")
	}
	if ok, _, _ := w.take(start+sec+wait, size, 10, 1); !ok {
		t.Fatal("refused after the wait")
	}
	// A gap of two windows forgets everything.
	for i := 0; i < 10; i++ {
		if ok, _, _ := w.take(start+40*sec, size, 10, 1); !ok {
			t.Fatalf("after gap: take %d refused", i)
		}
	}
}

// TestSlidingWindowAgainstExactLog runs random bursty traffic through the
// sliding-window counter and through an exact sliding log, and checks the
// counter against both its hard bound (no trailing window of the admitted
// requests holds more than 2×limit) and its typical accuracy (what it
// admits is close to what the exact log admits).
func TestSlidingWindowAgainstExactLog(t *testing.T) {
	const limit = 100
	size := 10 * sec
	rng := rand.New(rand.NewSource(1))
	for _, offered := range []float64{0.5, 1.2, 3} { // offered load ÷ limit
		var w slidingWindow
		var exact []int64    // admitted by the exact log limiter
		var admitted []int64 // admitted by the counter
		now := 1000 * sec
		var worst int
		for i := 0; i < 200_000; i++ {
			// Poisson arrivals whose rate drifts, so windows are uneven.
			rate := offered * limit / 10 * (1 + 0.8*sinLike(float64(i)/3000))
			now += int64(rng.ExpFloat64() / rate * 1e9)
			if ok, _, _ := w.take(now, size, limit, 1); ok {
				admitted = append(admitted, now)
			}
			if n := countSince(exact, now-size); n < limit {
				exact = append(exact, now)
			}
			if n := countSince(admitted, now-size); n > worst {
				worst = n
			}
		}
		if worst >= 2*limit {
			t.Errorf("load %.1f: a trailing window held %d admitted requests, bound is < %d", offered, worst, 2*limit)
		}
		diff := float64(len(admitted)-len(exact)) / float64(len(exact))
		t.Logf("load %.1f×: counter admitted %d, exact log %d (%+.2f%%), worst trailing window %d (limit %d)",
			offered, len(admitted), len(exact), 100*diff, worst, limit)
		if diff < -0.05 || diff > 0.05 {
			t.Errorf("load %.1f: counter admitted %+.1f%% vs exact log, want within 5%%", offered, 100*diff)
		}
	}
}

func sinLike(x float64) float64 { // a cheap periodic drift in [-1, 1]
	x -= float64(int64(x/4)) * 4
	if x < 2 {
		return x - 1
	}
	return 3 - x
}

// countSince counts timestamps after since in a sorted log.
func countSince(log []int64, since int64) int {
	lo, hi := 0, len(log)
	for lo < hi {
		m := (lo + hi) / 2
		if log[m] > since {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return len(log) - lo
}

func TestRuleFieldErrors(t *testing.T) {
	cases := []struct {
		f     rulestore.Fields
		field string
		msg   string
	}{
		{rulestore.Fields{}, "qps", "required"},
		{rulestore.Fields{"qps": "0"}, "qps", "> 0"},
		{rulestore.Fields{"qps": "1", "limit_type": "leaky"}, "limit_type", "token_bucket, sliding_window or calendar"},
		{rulestore.Fields{"qps": "1", "colour": "red"}, "colour", "unknown field"},
		{rulestore.Fields{"qps": "1", "burst": "2", "requested_tokens": "3"}, "requested_tokens", "exceeds burst"},
		{rulestore.Fields{"qps": "1", "limit_type": "sliding_window", "burst": "2"}, "burst", "token_bucket only"},
		{rulestore.Fields{"qps": "1", "window_size": "2"}, "window_size", "sliding_window only"},
		{rulestore.Fields{"qps": "0.01", "limit_type": "SLIDING_WINDOW", "window_size": "10"}, "qps", "allows no request"},
		{rulestore.Fields{"qps": "1", "key_resolver": "bogus"}, "key_resolver", "neither a preset"},
		{rulestore.Fields{"qps": "1", "on_empty_key": "deny 200"}, "on_empty_key", "400-599"},
		{rulestore.Fields{"qps": "1", "scope": "fleet"}, "scope", "local or cluster"},
		{rulestore.Fields{"qps": "1", "on_redis_error": "allow"}, "on_redis_error", "scope cluster only"},
		{rulestore.Fields{"qps": "1", "scope": "cluster", "on_redis_error": "panic"}, "on_redis_error", "allow, deny [status] or local"},
		{rulestore.Fields{"qps": "1", "scope": "cluster", "on_redis_error": "deny 200"}, "on_redis_error", "400-599"},
		{rulestore.Fields{"qps": "1", "scope": "cluster", "on_redis_error": "allow 503"}, "on_redis_error", "allow, deny [status] or local"},
		{rulestore.Fields{"qps": "1", "scope": "cluster", "redis_timeout": "50"}, "redis_timeout", "needs a unit, e.g. 50s or 50ms"},
		{rulestore.Fields{"qps": "1", "scope": "cluster", "redis_timeout": "1m"}, "redis_timeout", "1ms to 10s"},
		{rulestore.Fields{"qps": "10", "scope": "cluster", "lease_size": "11"}, "lease_size", "exceeds the quota 10"},
		{rulestore.Fields{"qps": "10", "scope": "cluster", "lease_size": "2", "requested_tokens": "3"}, "lease_size", "less than requested_tokens"},
		{rulestore.Fields{"qps": "10", "lease_size": "2"}, "lease_size", "scope cluster only"},
		{rulestore.Fields{"qps": "1", "overrides": "user:1"}, "overrides", "key=qps"},
		{rulestore.Fields{"qps": "1", "status": "200"}, "status", "400-599"},
		{rulestore.Fields{"qps": "1", "shadow": "maybe"}, "shadow", "true or false"},
		{rulestore.Fields{"qps": "1", "max_keys": "0"}, "max_keys", "from 1 to 1000000000"},
	}
	for _, c := range cases {
		_, err := ParseRule("t", c.f)
		var fe *rulestore.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: got %v, want a FieldError on %s containing %q", c.f, err, c.field, c.msg)
		}
	}
	r := mustRule(t, rulestore.Fields{"qps": "2.5", "limit_type": "Token_Bucket", "overrides": "tenant:vip:/a=25/30, user:42=1", "on_empty_key": "anonymous"})
	if r.Limits.Burst != 3 || r.Overrides["tenant:vip:/a"].Burst != 30 || r.Overrides["user:42"].Burst != 1 || r.emptyLiteral != "empty:anonymous" {
		t.Fatalf("parsed %+v", r)
	}
}

func TestEngineOverridesAndConcurrency(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "1", "burst": "2", "overrides": "user:vip=1/20", "max_concurrent": "3"})
	e := newLocalEngine(r)
	now := 5 * sec
	var held []Decision
	for i := 0; i < 3; i++ {
		d := e.Take(r, []byte("user:vip"), now)
		if !d.OK() || d.Limits.quota != 20 {
			t.Fatalf("vip take %d: %+v", i, d)
		}
		held = append(held, d)
	}
	if d := e.Take(r, []byte("user:vip"), now); d.Reason != TooManyInFlight {
		t.Fatalf("4th concurrent: %v", d.Reason)
	}
	e.Release(&held[0])
	e.Release(&held[0]) // twice is harmless
	if d := e.Take(r, []byte("user:vip"), now); !d.OK() {
		t.Fatalf("after release: %v", d.Reason)
	}
	if d := e.Take(r, []byte("user:bob"), now); !d.OK() || d.Limits.quota != 2 {
		t.Fatalf("bob: %+v", d)
	}
}

// TestMillionKeysStayUnderMaxKeys plays a key-cardinality attack: a million
// distinct keys against max_keys 100000. The table never tracks more than
// max_keys, evicting the least recently used, and a key in steady use is
// never evicted.
func TestMillionKeysStayUnderMaxKeys(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "1", "burst": "1", "max_keys": "100000"})
	e := newLocalEngine(r)
	now := sec
	hot := []byte("ip:10.0.0.1")
	e.Take(r, hot, now)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	key := make([]byte, 0, 32)
	hotPassed := 0
	for i := 0; i < 1_000_000; i++ {
		now += int64(time.Microsecond)
		key = fmt.Appendf(key[:0], "ip:attacker-%d", i)
		e.Take(r, key, now)
		if i%100 == 0 {
			// The hot key is used all along: it stays, with its state,
			// so over this 1s of fake time it passes at most twice
			// (burst 1 plus one refill); evicted, it would pass often.
			if d := e.Take(r, hot, now); d.OK() {
				hotPassed++
			}
		}
		if n := e.Keys(); n > int64(r.MaxKeys) {
			t.Fatalf("after %d keys: tracking %d > max_keys %d", i+1, n, r.MaxKeys)
		}
	}
	if hotPassed > 2 {
		t.Fatalf("hot key passed %d times: it was evicted and reset", hotPassed)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := e.Keys()
	if n < int64(r.MaxKeys)*9/10 {
		t.Fatalf("tracking %d keys, want close to max_keys", n)
	}
	t.Logf("tracked keys %d; heap %.0f bytes per tracked key", n, float64(after.HeapAlloc-before.HeapAlloc)/float64(n))
	// Idle keys go away: a qps-1 burst-1 bucket is fresh after 1s.
	e.tab.sweep(now+2*sec, r.idle)
	if got := e.Keys(); got != 0 {
		t.Fatalf("after sweep of idle keys: %d tracked", got)
	}
}

func TestSmallMaxKeysIsExactLRU(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "0.001", "burst": "1", "max_keys": "3"})
	e := newLocalEngine(r)
	now := sec
	for _, k := range []string{"a", "b", "c"} {
		e.Take(r, []byte(k), now)
	}
	e.Take(r, []byte("a"), now) // refused, but touches a
	e.Take(r, []byte("d"), now) // evicts b, the least recently used
	if d := e.Take(r, []byte("a"), now); d.OK() {
		t.Fatal("a was evicted, want b")
	}
	if d := e.Take(r, []byte("b"), now); !d.OK() {
		t.Fatal("b was kept, want it evicted (its one token spent is within what eviction forgives)")
	}
	if e.Keys() != 3 {
		t.Fatalf("keys %d", e.Keys())
	}
}

func TestEngineConcurrentTakesAreExact(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "0.001", "burst": "1000", "key_resolver": "global"})
	e := newLocalEngine(r)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for i := 0; i < 500; i++ {
				if d := e.Take(r, []byte("global"), sec); d.OK() {
					n++
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if admitted != 1000 {
		t.Fatalf("admitted %d of 4000 concurrent requests, want exactly burst 1000", admitted)
	}
}

func TestLimiterKeepsCountersWhenNumbersChange(t *testing.T) {
	l := newLimiter("x", func() int64 { return sec })
	defer l.Destruct()
	r1 := mustRule(t, rulestore.Fields{"qps": "0.001", "burst": "3"})
	l.engine(r1).Take(r1, []byte("k"), sec)
	l.engine(r1).Take(r1, []byte("k"), sec)
	r2 := mustRule(t, rulestore.Fields{"qps": "0.001", "burst": "5"})
	if d := l.engine(r2).Take(r2, []byte("k"), sec); !d.OK() || d.Remaining != 0 {
		t.Fatalf("after a numbers-only change: %+v, want the old count kept (1 token left, now 0)", d)
	}
	r3 := mustRule(t, rulestore.Fields{"qps": "5", "limit_type": "sliding_window"})
	if d := l.engine(r3).Take(r3, []byte("k"), sec); !d.OK() || d.Remaining != 4 {
		t.Fatalf("after a limit_type change: %+v, want fresh counters", d)
	}
}

// A panic downstream still frees the in-flight slot (the deferred release
// runs while the panic unwinds to Caddy's recovery).
func TestSlotReleasedOnPanic(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "1e6", "max_concurrent": "1", "key_resolver": "global"})
	e := newLocalEngine(r)
	d := e.Take(r, []byte("global"), sec)
	if !d.OK() {
		t.Fatal(d.Reason)
	}
	func() {
		defer func() { recover() }()
		serveHolding(nil, nil, panicHandler{}, e, d)
	}()
	if e.InFlight() != 0 {
		t.Fatalf("in flight %d after panic", e.InFlight())
	}
	if d := e.Take(r, []byte("global"), sec); !d.OK() {
		t.Fatalf("slot not freed after panic: %v", d.Reason)
	}
}

type panicHandler struct{}

func (panicHandler) ServeHTTP(http.ResponseWriter, *http.Request) error { panic("boom") }
