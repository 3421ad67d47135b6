//go:build !linux

package ratelimit

import "time"

// kernelSleepUntil sleeps until due. Elsewhere than Linux it is an
// ordinary sleep: the Go timer's millisecond rounding is Linux's epoll.
func kernelSleepUntil(due int64) {
	if left := due - monotonicNow(); left > 0 {
		time.Sleep(time.Duration(left))
	}
}
