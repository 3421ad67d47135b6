package ratelimit

import (
	"net/http"
	"testing"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// A cluster rule's settlement is one more call per request in the
// client's batches (as before the settlement metrics), and a settlement
// taking the key into debt adds none: Redis's reply to it says so. Serial
// requests of one client, so each call is its own round trip and the
// counts are exact.
func TestSettleClusterCallsPerRequest(t *testing.T) {
	srv := redistest.Start(t)
	be := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	const n = 20
	// Redis learns the scripts first (a script's first call is two round
	// trips): not counted below.
	warm := clusterRule(t, rulestore.Fields{"qps": "1e9", "key_resolver": "global",
		"response_cost": "{http.response.header.X-Tokens-Used}", "reserve": "1"})
	wl := instance(t, be, "calls-warm")
	if err := (&Handler{inline: warm, fixed: wl}).ServeHTTP(&discardWriter{h: http.Header{}}, newBenchRequests(1).next(0), usageNext); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		fields     rulestore.Fields
		used       []string // the upstream's report to each request (the last repeats)
		calls      int64    // Redis calls for n requests
		debt       uint64
		charged    uint64
		refunded   uint64
		allowedMin int64
	}{
		{"response_cost=off", rulestore.Fields{"qps": "1e9", "key_resolver": "global"}, []string{"3"}, n, 0, 0, 0, n},
		// reserve 1, 3 reported: 2 charged per request, never in debt.
		{"response_cost=on", rulestore.Fields{"qps": "1e9", "key_resolver": "global",
			"response_cost": "{http.response.header.X-Tokens-Used}", "reserve": "1", "max_cost": "10"}, []string{"3"}, 2 * n, 0, 2 * n, 0, n},
		// burst 10, reserve 1: 5 reported leaves 5, 10 reported then takes
		// the key to -5 (debt); the next request is refused by Redis, and
		// the others by this instance, which remembers that refusal.
		{"debt", rulestore.Fields{"qps": "0.001", "burst": "10", "key_resolver": "global",
			"response_cost": "{http.response.header.X-Tokens-Used}", "reserve": "1"}, []string{"5", "10"}, 2 + 2 + 1, 1, 4 + 9, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clusterRule(t, tc.fields)
			l := instance(t, be, "calls-"+tc.name)
			h := &Handler{inline: r, fixed: l}
			br := newBenchRequests(1)
			d0, rt0 := batchStats(l)
			var allowed int64
			for i := 0; i < n; i++ {
				next := usageNextReporting(tc.used[min(i, len(tc.used)-1):][:1])
				w := &discardWriter{h: http.Header{}}
				if err := h.ServeHTTP(w, br.next(0), next); err != nil {
					t.Fatal(err)
				}
				if w.h.Get("X-Tokens-Used") != "" {
					allowed++
				}
			}
			d, rt := batchStats(l)
			if d-d0 != tc.calls || rt-rt0 != tc.calls {
				t.Errorf("%d requests: %d calls in %d round trips, want %d", n, d-d0, rt-rt0, tc.calls)
			}
			c := l.counters
			if allowed < tc.allowedMin || c.debtEntered.Load() != tc.debt || c.charged.Load() != tc.charged || c.refunded.Load() != tc.refunded {
				t.Errorf("allowed %d, debt entered %d, charged %d, refunded %d; want ≥%d, %d, %d, %d", allowed,
					c.debtEntered.Load(), c.charged.Load(), c.refunded.Load(), tc.allowedMin, tc.debt, tc.charged, tc.refunded)
			}
		})
	}
}
