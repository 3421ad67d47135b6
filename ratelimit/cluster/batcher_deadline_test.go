package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/engine"
)

// With Redis paused, one 4 s decision is in flight, and decisions of
// three timeouts queue behind it (no second batch leaves for so few): only
// the batcher's deadline timer can release the queued ones before the
// stuck batch's own deadline. Each gives up at its own deadline, never
// before, and the short ones long before the batch's, so the timer moved
// on from one deadline to the next.
func TestDeadlineWatchTimesOutEachDecisionAtItsOwnDeadline(t *testing.T) {
	srv := redistest.Start(t)
	l := &engine.Limits{ScriptArgs: [2]any{1000.0, 1000.0}}
	bt := warmBatcher(t, srv.Addr, l)
	srv.Pause()
	defer srv.Resume()
	type result struct {
		timeout, elapsed time.Duration
		err              error
	}
	results := make(chan result, 16)
	var wg sync.WaitGroup
	decide := func(key string, timeout time.Duration) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			_, err := bt.Run(engine.TokenBucket, key, l, 1, 1, timeout)
			results <- result{timeout, time.Since(t0), err}
		}()
	}
	const stuck = 4 * time.Second
	decide("k:stuck", stuck)
	deadline := time.Now().Add(5 * time.Second)
	for {
		bt.mu.Lock()
		flying, pending := len(bt.flying), len(bt.pending)
		bt.mu.Unlock()
		if flying == 1 && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first decision is not in flight: %d batches in flight, %d decisions waiting", flying, pending)
		}
		time.Sleep(time.Millisecond) // sleep: polling the batcher's state
	}
	for i := range 3 {
		for _, timeout := range []time.Duration{time.Second, 200 * time.Millisecond, 600 * time.Millisecond} {
			decide("k:"+timeout.String()+string(rune('a'+i)), timeout)
		}
	}
	wg.Wait()
	close(results)
	for r := range results {
		// Timed out by the timer, or by the batch's own deadline (the
		// latest of its decisions') when that one is due at the same time.
		if !isTimeout(r.err) {
			t.Errorf("timeout %v: %v, want a timeout (Redis is paused)", r.timeout, r.err)
		}
		if r.elapsed < r.timeout {
			t.Errorf("timeout %v: gave up after %v, before its deadline", r.timeout, r.elapsed)
		}
		// The margin is for a busy machine; the stuck batch holds until 4 s.
		if r.timeout < stuck && r.elapsed > r.timeout+2*time.Second {
			t.Errorf("timeout %v: gave up after %v, held by the batch in flight", r.timeout, r.elapsed)
		}
	}
}

// warmBatcher is a batcher of its own on Redis at addr, its token bucket
// script loaded (by one decision on rule numbers l), so that no decision
// of the test waits on a NOSCRIPT retry.
func warmBatcher(t *testing.T, addr string, l *engine.Limits) *Batcher {
	t.Helper()
	bt := NewBatcher(patientClient(t, addr))
	if _, err := bt.Run(engine.TokenBucket, "k:warm", l, 1, 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return bt
}

// isTimeout: a deadline passed (the batcher's own, or go-redis's on the
// batch's connection).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// Decisions whose redis_timeout is about one round trip share batches with
// decisions that wait 10 s, many at once and over and over: some are
// answered, some time out while their batch is in flight, and the pooled
// calls are used again at once. None gives up before its deadline (a call
// must never carry a timeout, or an answer, from an earlier decision into
// a later one), every answer is a grant from Redis, and the long ones are
// all answered. Run it with -race.
func TestDeadlineWatchWithPooledCallsUnderChurn(t *testing.T) {
	l := &engine.Limits{ScriptArgs: [2]any{1e9, 1e9}}
	bt := warmBatcher(t, redistest.Start(t).Addr, l)
	var mu sync.Mutex
	answered, timedOut := 0, 0
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		timeout := time.Millisecond
		if g%2 == 1 {
			timeout = 10 * time.Second
		}
		go func() {
			defer wg.Done()
			for i := range 200 {
				t0 := time.Now()
				res, err := bt.Run(engine.TokenBucket, "k:churn:"+string(rune('a'+g)), l, 1, 1, timeout)
				elapsed := time.Since(t0)
				mu.Lock()
				switch {
				case isTimeout(err): // the watch's, or the batch's at its latest deadline
					timedOut++
					if timeout > time.Millisecond {
						t.Errorf("caller %d, decision %d: %v after %v, want answered within 10s", g, i, err, elapsed)
					}
					if elapsed < timeout {
						t.Errorf("caller %d, decision %d: %v after %v, before its %v", g, i, err, elapsed, timeout)
					}
				case err != nil:
					t.Errorf("caller %d, decision %d: %v", g, i, err)
				default:
					answered++
					if res.N != 1 {
						t.Errorf("caller %d, decision %d: %+v, want 1 granted", g, i, res)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if answered+timedOut != 16*200 || answered < 8*200 {
		t.Errorf("%d answered and %d timed out of %d decisions, want at least the %d long ones answered",
			answered, timedOut, 16*200, 8*200)
	}
}
