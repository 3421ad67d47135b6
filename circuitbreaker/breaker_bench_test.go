package circuitbreaker

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func benchSettings(window string) Settings {
	s := Settings{FailureThreshold: 10, SuccessThreshold: 5, OpenDuration: 30 * time.Second, HalfOpenRequests: 1}
	switch window {
	case "count":
		s.WindowCount, s.FailureRate, s.MinRequests = 100, 50, 10
	case "time":
		s.WindowDuration, s.FailureRate, s.MinRequests = 10*time.Second, 50, 10
	}
	return s
}

// BenchmarkAllowRecordClosed is the hot path: admit a call on a closed
// breaker and record its success.
func BenchmarkAllowRecordClosed(b *testing.B) {
	for _, w := range []string{"consecutive", "count", "time"} {
		b.Run(w, func(b *testing.B) {
			br := NewBreaker(benchSettings(w), nil, nil)
			b.ReportAllocs()
			for b.Loop() {
				t, ok, _ := br.Allow()
				if !ok {
					b.Fatal("refused")
				}
				br.Record(t, Success, false)
			}
		})
		b.Run(w+"/parallel", func(b *testing.B) {
			br := NewBreaker(benchSettings(w), nil, nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, ok, _ := br.Allow()
					if !ok {
						b.Fatal("refused")
					}
					br.Record(t, Success, false)
				}
			})
		})
	}
}

// BenchmarkAllowOpen is the fast-fail check of an open breaker.
func BenchmarkAllowOpen(b *testing.B) {
	br := NewBreaker(benchSettings(""), nil, nil)
	for range 10 {
		t, _, _ := br.Allow()
		br.Record(t, Failure, false)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, _ := br.Allow(); ok {
			b.Fatal("admitted")
		}
	}
}

type nopNext struct{}

func (nopNext) ServeHTTP(w http.ResponseWriter, _ *http.Request) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// BenchmarkHandlerClosed is the handler's own cost on a closed breaker
// (rule in hand, no Caddy around it).
func BenchmarkHandlerClosed(b *testing.B) {
	r, err := ParseRule("bench-handler", map[string]string{"window": "100", "failure_rate": "50"})
	if err != nil {
		b.Fatal(err)
	}
	h := &Handler{inline: r, holder: shared.Holder(newRuleState)}
	defer h.holder.Release()
	req := httptest.NewRequest("GET", "/", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		if err := h.ServeHTTP(w, req, nopNext{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandlerOpen is the handler's fast fail: an open breaker's 503
// with Retry-After (rule in hand, no Caddy around it).
func BenchmarkHandlerOpen(b *testing.B) {
	r, err := ParseRule("bench-handler-open", map[string]string{"failure_threshold": "1"})
	if err != nil {
		b.Fatal(err)
	}
	h := &Handler{inline: r, holder: shared.Holder(newRuleState)}
	defer h.holder.Release()
	st := h.holder.Get(r.ID)
	st.use(r)
	t, _, _ := st.def.Allow()
	st.def.Record(t, Failure, false)
	req := httptest.NewRequest("GET", "/", nil)
	// One writer, reset each time: the allocations reported are the
	// handler's, not a new recorder's.
	w := &resetWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.code = 0
		if err := h.ServeHTTP(w, req, nopNext{}); err != nil || w.code != 503 {
			b.Fatal(err, w.code)
		}
	}
}

// resetWriter is a ResponseWriter a benchmark reuses without allocating.
type resetWriter struct {
	h    http.Header
	code int
}

func (w *resetWriter) Header() http.Header { return w.h }
func (w *resetWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *resetWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}
