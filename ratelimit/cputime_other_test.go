//go:build !linux

package ratelimit

// threadCPU is not read outside Linux: 0.
func threadCPU() int64 { return 0 }
