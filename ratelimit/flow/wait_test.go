package flow

import (
	"context"
	"errors"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"sync/atomic"
	"testing"
	"time"
)

// A paced request never goes before its slot, whether the end of its wait
// is slept in the kernel or (the kernel sleeper taken) on the timer; and
// its client going away ends a long wait with the client's error.
func TestSleepUntilNeverEarlyAndHonoursCancel(t *testing.T) {
	var sleepers atomic.Int32
	for _, busy := range []int32{0, MaxPreciseSleepers} {
		sleepers.Store(busy)
		for _, wait := range []time.Duration{0, 300 * time.Microsecond, 3 * time.Millisecond} {
			due := engine.Now() + int64(wait)
			if err := SleepUntil(context.Background(), due, &sleepers); err != nil {
				t.Fatalf("wait %v: %v", wait, err)
			}
			if early := due - engine.Now(); early > 0 {
				t.Fatalf("wait %v, %d kernel sleepers busy: returned %v before the slot", wait, busy, time.Duration(early))
			}
			if sleepers.Load() != busy {
				t.Fatalf("wait %v: %d kernel sleepers after, want %d", wait, sleepers.Load(), busy)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- SleepUntil(ctx, engine.Now()+int64(time.Hour), &sleepers) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled an hour before the slot: %v, want context.Canceled", err)
	}
}
