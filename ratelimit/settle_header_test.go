package ratelimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/rulestore"
)

// A rule charged by response_cost alone reads the cost from the
// response's header map once the handlers are done: a handler error
// after the upstream reported its cost is charged that cost, a trailer
// filed after the body counts, and a request holding an in-flight slot
// frees it (max_concurrent 1: the next request is admitted).
func TestSettleByResponseCost(t *testing.T) {
	h := benchHandler(t, rulestore.Fields{"qps": "0.001", "burst": "100", "key_resolver": "global",
		"response_cost": "{http.response.header.X-Cost}", "reserve": "10", "max_cost": "50", "max_concurrent": "1"})
	upstreamErr := caddyhttp.Error(http.StatusBadGateway, errors.New("upstream gone"))
	steps := []struct {
		name string
		next caddyhttp.HandlerFunc
		err  error
		left string // X-RateLimit-Remaining at admission
	}{
		{"error after reporting 30", func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("X-Cost", "30") // 20 more than the reserve: 70
			return upstreamErr
		}, upstreamErr, "90"},
		{"trailer of 5", func(w http.ResponseWriter, _ *http.Request) error {
			_, _ = w.Write([]byte("chunk"))
			w.Header()[http.TrailerPrefix+"X-Cost"] = []string{"5"} // 5 refunded: 65
			return nil
		}, nil, "60"},
		{"no report", func(w http.ResponseWriter, _ *http.Request) error {
			w.WriteHeader(http.StatusNoContent) // the reserve stands: 55
			return nil
		}, nil, "55"},
		{"last", func(http.ResponseWriter, *http.Request) error { return nil }, nil, "45"},
	}
	for _, st := range steps {
		rec := httptest.NewRecorder()
		err := h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil), st.next)
		if !errors.Is(err, st.err) {
			t.Fatalf("%s: error %v, want %v", st.name, err, st.err)
		}
		if got := rec.Header().Get("X-RateLimit-Remaining"); got != st.left {
			t.Fatalf("%s: remaining %q at admission, want %s", st.name, got, st.left)
		}
	}
	charged, refunded := h.fixed.settledTokens()
	if entered := h.fixed.counters.debtEntered.Load(); charged != 20 || refunded != 5 || entered != 0 {
		t.Fatalf("charged %d, refunded %d, debt entered %d; want 20, 5, 0", charged, refunded, entered)
	}
}

// Settling adds no allocation to an admitted request: a rule with
// response_cost allocates what the same rule without it does, as
// BenchmarkSettle runs them (each user's key seen once before).
func TestSettleAllocations(t *testing.T) {
	allocs := map[string]float64{}
	for _, tc := range settleCases() {
		h := benchHandler(t, tc.fields)
		br := newBenchRequests(100)
		w := &discardWriter{h: http.Header{}}
		serve := func(i int) {
			clear(w.h)
			if err := h.ServeHTTP(w, br.next(i), usageNext); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 100 { // a new key allocates
			serve(i)
		}
		i := 0
		allocs[tc.name] = testing.AllocsPerRun(100, func() { i++; serve(i) })
	}
	if allocs["response_cost=on"] > allocs["response_cost=off"] {
		t.Fatalf("allocations per request %v: settling adds some", allocs)
	}
}
