package flow

import (
	"context"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"sync/atomic"
	"time"
)

// preciseMargin: a paced request sleeps on a Go timer until this long
// before its slot, and the rest in the kernel (kernelSleepUntil). An idle
// Go process on Linux waits for its next timer in epoll_wait, whose
// timeout is whole milliseconds: a timer due in under 1 ms fires up to 1 ms
// late. 1.1 ms covers that rounding.
const preciseMargin = int64(1100 * time.Microsecond)

// MaxPreciseSleepers bounds the requests of one rule sleeping in the
// kernel at once. Each holds an OS thread, and its P until the scheduler
// takes it back, which costs CPU per request, more with every sleeper
// (docs/performance.md). At 1,000 qps slots
// are 1 ms apart, so one is enough; a request that finds it taken waits on
// the timer alone, as all did before.
const MaxPreciseSleepers = 1

// SleepUntil waits until due (engine.Now's clock), or until ctx ends,
// whose error it then returns. The client going away ends the wait at
// once, except in its last preciseMargin. sleepers counts the rule's
// requests sleeping in the kernel.
func SleepUntil(ctx context.Context, due int64, sleepers *atomic.Int32) error {
	if err := timerWait(ctx, due-preciseMargin); err != nil {
		return err
	}
	if sleepers.Add(1) <= MaxPreciseSleepers {
		kernelSleepUntil(due)
		sleepers.Add(-1)
		return nil
	}
	sleepers.Add(-1)
	return timerWait(ctx, due)
}

// timerWait waits on a Go timer until until, or until ctx ends.
func timerWait(ctx context.Context, until int64) error {
	left := until - engine.Now()
	if left <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(time.Duration(left))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
