package ratelimit

import (
	"syscall"
	"unsafe"
)

// threadCPU is the calling thread's CPU time in ns
// (CLOCK_THREAD_CPUTIME_ID), 0 if it cannot be read.
func threadCPU() int64 {
	const clockThreadCPUTime = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return ts.Nano()
}
