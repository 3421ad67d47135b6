package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// floodWriter keeps the status and headers of one response.
type floodWriter struct {
	h      http.Header
	status int
}

func (w *floodWriter) Header() http.Header         { return w.h }
func (w *floodWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *floodWriter) WriteHeader(code int)        { w.status = code }

// heapAfterGC is the live heap once garbage is collected.
func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC() // a second cycle empties the sync.Pools the first one moved to their victim caches
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// 100,000 requests flood a paced rule (1 qps, max_queue_wait 1m, so 60
// slots would fit) whose queue holds max_queued 50: the first goes at
// once, 50 wait for their slots, and every other one is refused at once
// with 429 and a Retry-After, while the waiters still wait. Once the
// waiters' clients go, they end (499), the queue is empty, the goroutines
// return to their baseline, and the heap holds nothing of the flood.
//
// Without the race detector all 100,000 are live goroutines at once,
// released together, as an HTTP server would hold them. The race detector
// allows at most 8128 live goroutines, so under it (the -race suite, also
// with -short) the same 100,000 requests run with at most 4,000 in flight
// at a time: the waiters still hold 50 of them, and every other request
// still arrives while the queue is full.
func TestPaceFloodRefusedAtOnce(t *testing.T) {
	const n, maxQueued = 100_000, 50
	concurrency := n
	if raceEnabled {
		concurrency = 4000
	}
	f := rulestore.Fields{"qps": "1", "control_behavior": "pace", "max_queue_wait": "1m",
		"max_queued": strconv.Itoa(maxQueued), "key_resolver": "global"}
	r, err := ParseRule(InlineID(f), f)
	if err != nil {
		t.Fatal(err)
	}
	lim := newLimiter(r.ID, nil)
	defer lim.Destruct()
	h := &Handler{inline: r, fixed: lim}
	var admitted atomic.Int64
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		admitted.Add(1)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A first flood of idle goroutines grows the runtime's goroutine
	// tables (kept for reuse, ~0.5 KB each) before the baseline, so the
	// heap comparison sees the limiter, not the runtime.
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i := 0; i < concurrency; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); <-release }()
	}
	close(release)
	wg.Wait()
	goroutines := testcaddy.Settled(t, 10*time.Second, "goroutines", runtime.NumGoroutine)
	heapBefore := heapAfterGC()

	var done, refused, noRetry, cancelled atomic.Int64
	start := make(chan struct{})
	sem := make(chan struct{}, concurrency)
	began := time.Now()
	if concurrency < n {
		close(start)
	}
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			<-start
			req := httptest.NewRequest("GET", "/", nil)
			req = req.WithContext(context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer()))
			w := &floodWriter{h: http.Header{}}
			err := h.ServeHTTP(w, req, next)
			switch {
			case err != nil:
				var he caddyhttp.HandlerError
				if !errors.As(err, &he) || he.StatusCode != StatusClientClosed {
					t.Errorf("error %v", err)
				}
				cancelled.Add(1)
			case w.status == http.StatusTooManyRequests:
				refused.Add(1)
				if v, err := strconv.Atoi(w.h.Get("Retry-After")); err != nil || v < 1 {
					noRetry.Add(1)
				}
			case w.status != 0:
				t.Errorf("status %d", w.status)
			}
			done.Add(1)
		}()
	}
	if concurrency == n {
		close(start)
	}
	eng := lim.engine(r).(*localEngine)
	// Everything but the waiters ends without waiting for a slot.
	testcaddy.Eventually(t, 2*time.Minute, "every request but the waiters to end", func() bool {
		return done.Load()+eng.Queued().Load() == n
	})
	elapsed := time.Since(began)
	waiting := eng.Queued().Load()
	t.Logf("%d requests in %v: %d admitted, %d waiting, %d refused", n, elapsed, admitted.Load(), waiting, refused.Load())
	// One slot per second came due meanwhile (its waiter left the queue
	// and a later request took its place): admitted ≤ 1 + elapsed s + 1.
	if waiting > maxQueued || waiting < 1 {
		t.Errorf("%d waiting, want 1..%d (max_queued)", waiting, maxQueued)
	}
	if a := admitted.Load(); a < 1 || a > 2+int64(elapsed.Seconds()) {
		t.Errorf("%d admitted in %v at 1 qps", a, elapsed)
	}
	if got := refused.Load(); got != n-admitted.Load()-waiting || noRetry.Load() != 0 {
		t.Errorf("%d refused (%d without Retry-After), want all %d others with one", got, noRetry.Load(), n-admitted.Load()-waiting)
	}

	cancel() // the waiters' clients go
	wg.Wait()
	if cancelled.Load() != waiting || eng.Queued().Load() != 0 {
		t.Errorf("%d ended by their client going, want the %d waiting; %d still queued", cancelled.Load(), waiting, eng.Queued().Load())
	}
	testcaddy.Eventually(t, 10*time.Second, "goroutines back to their baseline", func() bool {
		return runtime.NumGoroutine() <= goroutines
	})
	// The limiter keeps one entry for the global key and a counter; every
	// request's memory is garbage once it ends. 4 MB leaves room for the
	// metric and pool noise, far below the ~100 MB the 100,000 requests
	// held while in flight.
	growth := int64(heapAfterGC()) - int64(heapBefore)
	t.Logf("heap growth after GC: %d KB", growth/1024)
	if growth > 4<<20 {
		t.Errorf("heap grew %d KB after the flood, want < 4 MB", growth/1024)
	}
}
