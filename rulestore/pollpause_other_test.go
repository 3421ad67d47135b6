//go:build !linux

package rulestore

import "time"

// pollPause pauses a benchmark's poll loop (see the Linux version).
func pollPause() { time.Sleep(10 * time.Microsecond) } // sleep: a poll interval, see pollpause_linux_test.go
