package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkTake measures one decision of the local engine: one hot key or
// 100,000 keys, serial and parallel, both engines. The rules never reject.
func BenchmarkTake(b *testing.B) {
	for _, typ := range []string{"token_bucket", "sliding_window"} {
		// max_keys above the key count: this measures decisions, not eviction.
		r := mustRule(b, rulestore.Fields{"limit_type": typ, "qps": "1e9", "max_keys": "1000000"})
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

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkServeHTTP is the handler on a rule that never rejects, keyed by
// user id over 10,000 users, with headers on (the default) and off.
func BenchmarkServeHTTP(b *testing.B) {
	for _, headers := range []string{"on", "off"} {
		b.Run("headers="+headers, func(b *testing.B) {
			f := rulestore.Fields{"qps": "1e9", "key_resolver": "userId", "headers": headers}
			r, err := ParseRule(InlineID(f), f)
			if err != nil {
				b.Fatal(err)
			}
			lim := newLimiter(r.ID, nil)
			defer lim.Destruct()
			h := &Handler{inline: r, fixed: lim}
			next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
			const users = 10_000
			reqs := make([]*http.Request, users)
			for i := range reqs {
				req := httptest.NewRequest("GET", "/api", nil)
				req.Header.Set("X-User-Id", fmt.Sprint(i))
				repl := caddy.NewReplacer()
				ctx := context.WithValue(req.Context(), caddy.ReplacerCtxKey, repl)
				ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, map[string]any{caddyhttp.ClientIPVarKey: "10.0.0.1"})
				reqs[i] = req.WithContext(ctx)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				i := 0
				for pb.Next() {
					i++
					clear(w.h)
					if err := h.ServeHTTP(w, reqs[i%users], next); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
