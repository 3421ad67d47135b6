//go:build race

package ratelimit

// raceEnabled: the race detector allows at most 8128 live goroutines.
const raceEnabled = true
