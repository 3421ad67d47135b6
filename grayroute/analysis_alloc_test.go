//go:build !race

// The race detector makes sync.Pool drop objects at random, so allocations
// are only measured without it.

package grayroute

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/rulestore"
)

type fixedWriter struct{ h http.Header }

func (w *fixedWriter) Header() http.Header         { return w.h }
func (w *fixedWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *fixedWriter) WriteHeader(int)             {}

// TestCountingDoesNotAllocate: counting a request's outcome costs no
// allocation (the status recorder is pooled, the counters are atomics).
func TestCountingDoesNotAllocate(t *testing.T) {
	h := newHandler(t, RuleRef{ID: "plain", Inline: graySpec(rulestore.Fields{"target_version": "v2"})})
	t.Cleanup(func() { h.Cleanup() })
	var cc cohortCounts
	w := &fixedWriter{h: http.Header{}}
	r, _ := http.NewRequest("GET", "http://x/", nil)
	var next caddyhttp.Handler = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(503)
		return nil
	})
	if n := testing.AllocsPerRun(1000, func() { h.serveCounted(w, r, next, &cc) }); n != 0 {
		t.Fatalf("%v allocations per counted request", n)
	}
	if cc.errors.Load() == 0 {
		t.Fatal("nothing counted")
	}
}

// BenchmarkCountedRequest is the analysis's cost on the request path.
func BenchmarkCountedRequest(b *testing.B) {
	h := newHandler(b, RuleRef{ID: "plain", Inline: graySpec(rulestore.Fields{"target_version": "v2"})})
	b.Cleanup(func() { h.Cleanup() })
	var cc cohortCounts
	var next caddyhttp.Handler = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(200)
		return nil
	})
	r, _ := http.NewRequest("GET", "http://x/", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &fixedWriter{h: http.Header{}}
		for pb.Next() {
			h.serveCounted(w, r, next, &cc)
		}
	})
}

// BenchmarkCountedProxiedRequest: the same with the request's replacer
// holding reverse_proxy's upstream latency, which the analysis reads.
func BenchmarkCountedProxiedRequest(b *testing.B) {
	h := newHandler(b, RuleRef{ID: "plain", Inline: graySpec(rulestore.Fields{"target_version": "v2"})})
	b.Cleanup(func() { h.Cleanup() })
	var cc cohortCounts
	var next caddyhttp.Handler = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(200)
		return nil
	})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		repl := caddy.NewReplacer()
		repl.Set(upstreamLatency, time.Nanosecond) // within any handler's time
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
		w := &fixedWriter{h: http.Header{}}
		for pb.Next() {
			h.serveCounted(w, r, next, &cc)
		}
	})
	if n := cc.latency[0].Load(); n != cc.requests.Load() {
		b.Fatalf("%d of %d requests counted at the upstream's latency", n, cc.requests.Load())
	}
}
