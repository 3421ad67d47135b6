package ratelimit

import (
	"errors"
	"fmt"
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
		if !d.OK() || d.Limits.Quota != 20 {
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
	if d := e.Take(r, []byte("user:bob"), now); !d.OK() || d.Limits.Quota != 2 {
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
	e.Sweep(now+2*sec, r.Idle)
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
