package ratelimit

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkTake measures one decision of the local engine: one hot key or
// 100,000 keys, serial and parallel, each engine. The rules never reject.
func BenchmarkTake(b *testing.B) {
	for _, typ := range []string{"token_bucket", "sliding_window", "calendar"} {
		// max_keys above the key count: this measures decisions, not eviction.
		f := rulestore.Fields{"limit_type": typ, "qps": "1e9", "max_keys": "1000000"}
		if typ == "calendar" {
			f = rulestore.Fields{"quota": "1000000000000", "period": "day", "timezone": "Europe/Berlin", "max_keys": "1000000"}
		}
		r := mustRule(b, f)
		for _, nkeys := range []int{1, 100_000} {
			keys := make([][]byte, nkeys)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "user:%d", i)
			}
			name := fmt.Sprintf("%s/keys=%d", typ, nkeys)
			b.Run(name+"/serial", func(b *testing.B) {
				e := newLocalEngine(r)
				now := sec
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					now += 1000
					e.Take(r, keys[i%nkeys], now)
				}
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				e := newLocalEngine(r)
				var clock atomic.Int64
				clock.Store(sec)
				var seq atomic.Int64
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(7919))
					for pb.Next() {
						i++
						e.Take(r, keys[i%nkeys], sec+int64(i)*1000)
					}
				})
			})
		}
	}
}

// discardWriter stands in for net/http's response writer without
// allocating: its header map is reused (cleared per request, with the
// Server header Caddy sets first, so it holds what a real response's map
// holds) and writes go nowhere.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

var serverHeader = []string{"Caddy"}

// benchRequests are one benchmark goroutine's requests, one per user, all
// sharing one replacer and one vars map that are reset to the state Caddy's
// server hands to the handlers (the replacer's providers, nothing set; the
// client's address) before each request.
type benchRequests struct {
	reqs       []*http.Request
	repl, tmpl *caddy.Replacer
	vars, init map[string]any
}

func newBenchRequests(users int) *benchRequests {
	vars := map[string]any{caddyhttp.ClientIPVarKey: "10.0.0.1"}
	base := httptest.NewRequest("GET", "/api", nil)
	base = base.WithContext(context.WithValue(base.Context(), caddyhttp.VarsCtxKey, vars))
	br := &benchRequests{tmpl: caddyhttp.NewTestReplacer(base), repl: new(caddy.Replacer), vars: vars}
	br.init = maps.Clone(vars) // with the start time the replacer set
	*br.repl = *br.tmpl
	ctx := context.WithValue(base.Context(), caddy.ReplacerCtxKey, br.repl)
	for i := 0; i < users; i++ {
		req := base.Clone(ctx)
		req.Header.Set("X-User-Id", fmt.Sprint(i))
		br.reqs = append(br.reqs, req)
	}
	return br
}

// next returns request i, its replacer and vars as fresh as a new
// request's (the provider a handler added last time is dropped, and what it
// left in the vars).
func (br *benchRequests) next(i int) *http.Request {
	*br.repl = *br.tmpl
	clear(br.vars)
	maps.Copy(br.vars, br.init)
	return br.reqs[i%len(br.reqs)]
}

// BenchmarkServeHTTP is the handler in front of Caddy's `respond "ok"`, on
// a rule that never rejects, keyed by user id over 10,000 users, with
// headers on (the default) and off; handler=none is `respond` alone, so
// the handler's own cost is the difference. Each request starts with a
// replacer as Caddy's server makes it (NewReplacer plus the HTTP
// provider); the writer allocates nothing (see discardWriter).
func BenchmarkServeHTTP(b *testing.B) {
	respond := caddyhttp.StaticResponse{Body: "ok"}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return respond.ServeHTTP(w, r, nil)
	})
	for _, headers := range []string{"on", "off", "none", "store"} {
		name := "headers=" + headers
		var h caddyhttp.MiddlewareHandler = passThrough{}
		switch headers {
		case "none":
			name = "handler=none"
		case "store":
			// As scripts/bench.sh runs it: `ratelimit bench_rl`, a rule of
			// the store, provisioned in a running config (headers on).
			name = "rule=store"
			h = provisionedHandler(b, "bench_rl", rulestore.Fields{"qps": "1e9", "key_resolver": "userId"})
		default:
			f := rulestore.Fields{"qps": "1e9", "key_resolver": "userId", "headers": headers}
			r, err := ParseRule(InlineID(f), f)
			if err != nil {
				b.Fatal(err)
			}
			lim := newLimiter(r.ID, nil)
			defer lim.Destruct()
			h = &Handler{inline: r, fixed: lim}
		}
		b.Run(name, func(b *testing.B) {
			benchHandlerParallel(b, h, next, runtime.GOMAXPROCS(0), 10_000)
		})
	}
}

// provisionedHandler provisions `ratelimit <id>` in a running in-process
// Caddy whose rule store declares rule id with fields f, as a real config
// does (the handler then reads its rule from the store per request).
func provisionedHandler(t testing.TB, id string, f rulestore.Fields) *Handler {
	t.Helper()
	return provisionedRules(t, map[string]any{id: f}, id)[0]
}

// reportCPU reports the process's CPU time (user + system, GC included)
// per op when the returned func is called: on a machine shared with other
// work, a steadier figure than wall-clock ns/op.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}

func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

type passThrough struct{}

var nopNext = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

func (passThrough) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

func benchHandler(t testing.TB, f rulestore.Fields) *Handler {
	t.Helper()
	r, err := ParseRule(InlineID(f), f)
	if err != nil {
		t.Fatal(err)
	}
	lim := newLimiter(r.ID, nil)
	t.Cleanup(func() { lim.Destruct() })
	return &Handler{inline: r, fixed: lim}
}

// TestServeHTTPAllocations counts the handler's own allocations on an
// admitted request, as BenchmarkServeHTTP runs it: the provider holding
// the placeholders, and with headers one block for their values.
func TestServeHTTPAllocations(t *testing.T) {
	for headers, want := range map[string]float64{"on": 2, "off": 1} {
		h := benchHandler(t, rulestore.Fields{"qps": "1e9", "key_resolver": "userId", "headers": headers})
		br := newBenchRequests(100)
		w := &discardWriter{h: http.Header{}}
		for i := range 100 { // each user's key once: a new key allocates
			if err := h.ServeHTTP(w, br.next(i), nopNext); err != nil {
				t.Fatal(err)
			}
		}
		i := 0
		n := testing.AllocsPerRun(100, func() {
			i++
			clear(w.h)
			w.h["Server"] = serverHeader
			if err := h.ServeHTTP(w, br.next(i), nopNext); err != nil {
				t.Fatal(err)
			}
		})
		if n > want {
			t.Errorf("headers %s: %v allocations per request, want %v", headers, n, want)
		}
	}
}

// TestPlaceholdersReadLater reads the placeholders after the handler has
// returned, as a log does: the first Sluice handler on a request answers
// them through its provider, a later one by setting them, and the later
// handler's values are the ones read.
func TestPlaceholdersReadLater(t *testing.T) {
	const names = "{http.ratelimit.rule}|{http.ratelimit.key}|{http.ratelimit.limit}|{http.ratelimit.remaining}|" +
		"{http.ratelimit.result}|{http.ratelimit.retry_after}|{http.grayroute.version}|{http.ratelimit.queue_wait}"
	first := benchHandler(t, rulestore.Fields{"qps": "1e9", "burst": "1000", "key_resolver": "userId"})
	second := benchHandler(t, rulestore.Fields{"qps": "1", "burst": "1", "key_resolver": "ip"})
	br := newBenchRequests(1)
	req := br.next(0)
	w := &discardWriter{h: http.Header{}}
	if err := first.ServeHTTP(w, req, nopNext); err != nil {
		t.Fatal(err)
	}
	want := first.inline.ID + "|user:0|1000|999|allowed||" + "|{http.ratelimit.queue_wait}"
	if got := br.repl.ReplaceKnown(names, ""); got != want {
		t.Fatalf("after one handler:\n got %s\nwant %s", got, want)
	}
	if got := w.h.Get("Ratelimit"); got != `"`+first.inline.ID+`";r=999;t=1` {
		t.Fatalf("RateLimit header %q", got)
	}
	if err := second.ServeHTTP(w, req, nopNext); err != nil {
		t.Fatal(err)
	}
	if err := second.ServeHTTP(w, req, nopNext); err != nil {
		t.Fatal(err)
	}
	want = second.inline.ID + "|ip:10.0.0.1|1|0|rate_limited|1|" + "|{http.ratelimit.queue_wait}"
	if got := br.repl.ReplaceKnown(names, ""); got != want {
		t.Fatalf("after a second handler refused:\n got %s\nwant %s", got, want)
	}
}

// BenchmarkTakeEvict is one decision of the local engine for a key it has
// never seen, at max_keys 10,000, so each evicts one: the path a flood of
// distinct keys takes. The keys spend one unit each (a trace to keep).
func BenchmarkTakeEvict(b *testing.B) {
	for _, typ := range []string{"token_bucket", "sliding_window", "calendar"} {
		f := rulestore.Fields{"limit_type": typ, "qps": "10", "burst": "100", "max_keys": "10000"}
		if typ == "sliding_window" {
			f = rulestore.Fields{"limit_type": typ, "qps": "1", "window_size": "100s", "max_keys": "10000"}
		}
		if typ == "calendar" {
			f = rulestore.Fields{"quota": "1000", "period": "day", "max_keys": "10000"}
		}
		r := mustRule(b, f)
		b.Run(typ, func(b *testing.B) {
			e := newLocalEngine(r)
			key := make([]byte, 0, 32)
			now := sec
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				now += 1000
				key = fmt.Appendf(key[:0], "junk:%d", i)
				e.Take(r, key, now)
			}
		})
	}
}
