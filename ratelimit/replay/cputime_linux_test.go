package replay

import "syscall"

// processCPU is the process's CPU time (user and system) in ns, 0 if it
// cannot be read: on a loaded machine the wall time per op overstates a
// benchmark's cost, its CPU time does not.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
