//go:build !linux

package flow

import (
	"github.com/sluicegw/sluice/ratelimit/engine"
	"time"
)

// kernelSleepUntil sleeps until due. Elsewhere than Linux it is an
// ordinary sleep: the Go timer's millisecond rounding is Linux's epoll.
func kernelSleepUntil(due int64) {
	if left := due - engine.Now(); left > 0 {
		time.Sleep(time.Duration(left))
	}
}
