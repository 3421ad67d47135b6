package rulestore

import "syscall"

// pollPause pauses a benchmark's poll loop for about 10 µs in the kernel's
// nanosleep. A Go timer would do too, but an idle Go process wakes for its
// timers on a millisecond-rounded wait, which added up to 1 ms to every
// propagation figure the loop read.
func pollPause() {
	ts := syscall.NsecToTimespec(10_000)
	_ = syscall.Nanosleep(&ts, nil)
}
