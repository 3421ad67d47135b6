package sluice_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/circuitbreaker"
	"github.com/sluicegw/sluice/grayroute"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
)

// BenchmarkChain runs the handlers' production ServeHTTP in front of
// Caddy's `respond "ok"`, without the network: each request is prepared as
// Caddy's server prepares it (a new replacer with the server's providers, the
// vars map, the context values) from one of 10,000 users, and goes through
// the rules scripts/bench.sh uses (a rate limit by user id that never
// rejects, headers on; a breaker that stays closed; a gray rule that does not
// match). Cases: respond alone (what every case pays), the rate limit
// alone, the chain ratelimit -> circuitbreaker -> grayroute, and the same
// chain with the breaker first. One request at a time; cpu-ns/op is the
// process's CPU time (user + system, GC included) while timed, per request:
// on a machine shared with other work, steadier than ns/op.
func BenchmarkChain(b *testing.B) {
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"apps": map[string]any{"rulestore": map[string]any{
			"rate_limit":      map[string]any{"bench_rl": map[string]any{"qps": "1e9", "key_resolver": "userId"}},
			"circuit_breaker": map[string]any{"bench_cb": map[string]any{"failure_threshold": "1000000"}},
			"gray": map[string]any{"bench_gray": map[string]any{
				"match_tag": "X-Canary", "match_value": "true", "target_version": "v2"}},
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	testcaddy.RunJSON(b, cfg)
	ctx := caddy.ActiveContext()
	provision := func(h caddy.Provisioner) {
		if err := h.Provision(ctx); err != nil {
			b.Fatal(err)
		}
		if c, ok := h.(caddy.CleanerUpper); ok {
			b.Cleanup(func() { c.Cleanup() })
		}
	}
	rl := &ratelimit.Handler{Rule: "bench_rl"}
	cb := &circuitbreaker.Handler{Rule: "bench_cb"}
	gray := &grayroute.Handler{Rules: []grayroute.RuleRef{{ID: "bench_gray"}}}
	for _, h := range []caddy.Provisioner{rl, cb, gray} {
		provision(h)
	}

	respond := caddyhttp.StaticResponse{Body: "ok"}
	end := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return respond.ServeHTTP(w, r, nil)
	})
	cases := []struct {
		name     string
		handlers []caddyhttp.MiddlewareHandler
	}{
		{"respond", nil},
		{"ratelimit", []caddyhttp.MiddlewareHandler{rl}},
		{"chain", []caddyhttp.MiddlewareHandler{rl, cb, gray}},
		{"breaker-first", []caddyhttp.MiddlewareHandler{cb, rl, gray}},
	}
	users := make([]*http.Request, 10_000)
	for i := range users {
		users[i] = httptest.NewRequest("GET", "/", nil)
		users[i].RemoteAddr = "10.0.0.1:40000"
		users[i].Header.Set("X-User-Id", fmt.Sprint("user", i+1))
	}
	// Every user's key once, so that no case pays for the table's inserts.
	warm := compose(cases[2].handlers, end)
	for _, u := range users {
		w := &discardWriter{h: http.Header{}}
		if err := warm.ServeHTTP(w, caddyhttp.PrepareRequest(u, caddy.NewReplacer(), w, nil)); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range cases {
		h := compose(c.handlers, end)
		b.Run(c.name, func(b *testing.B) {
			// Requests are prepared a batch at a time with the timer
			// stopped: ns/op, B/op and allocs/op are the handlers' and
			// respond's alone.
			const batch = 500
			reqs := make([]*http.Request, batch)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			var cpu int64
			for done := 0; done < b.N; {
				b.StopTimer()
				n := min(batch, b.N-done)
				for j := range n {
					reqs[j] = caddyhttp.PrepareRequest(users[(done+j)%len(users)], caddy.NewReplacer(), w, nil)
				}
				b.StartTimer()
				start := processCPU()
				for _, r := range reqs[:n] {
					clear(w.h)
					w.h["Server"] = serverHeader // Caddy's server sets it first
					w.status = 0
					if err := h.ServeHTTP(w, r); err != nil || w.status != 200 {
						b.Fatalf("%s: status %d, error %v", c.name, w.status, err)
					}
				}
				cpu += processCPU() - start
				done += n
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// compose chains handlers in front of end, as a Caddy route does.
func compose(handlers []caddyhttp.MiddlewareHandler, end caddyhttp.Handler) caddyhttp.Handler {
	next := end
	for i := len(handlers) - 1; i >= 0; i-- {
		h, after := handlers[i], next
		next = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return h.ServeHTTP(w, r, after)
		})
	}
	return next
}

// discardWriter stands in for net/http's response writer without
// allocating: its header map is reused, writes go nowhere.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

var serverHeader = []string{"Caddy"}

func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
