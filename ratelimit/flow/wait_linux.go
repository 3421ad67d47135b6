package flow

import (
	"github.com/sluicegw/sluice/ratelimit/engine"
	"syscall"
)

// kernelSleepUntil sleeps until due in nanosleep: the kernel's
// high-resolution timer (50 µs of slack by default), not the Go
// scheduler's millisecond-rounded wait for its next timer.
func kernelSleepUntil(due int64) {
	for {
		left := due - engine.Now()
		if left <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(left)
		_ = syscall.Nanosleep(&ts, nil) // interrupted (EINTR): the loop sleeps the rest
	}
}
