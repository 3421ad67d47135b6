package main

import (
	"math"
	"testing"
	"time"
)

// -work-cv draws the work time log-normal with mean -work and that
// coefficient of variation; 0 keeps it fixed.
func TestWorkTimeNoise(t *testing.T) {
	if d := newWorkers(1, 200*time.Millisecond, 0).workTime(); d != 200*time.Millisecond {
		t.Fatalf("-work-cv 0: %v, want 200ms", d)
	}
	k := newWorkers(1, 200*time.Millisecond, 0.3)
	const n = 100000
	var sum, sq float64
	for range n {
		d := float64(k.workTime())
		sum += d
		sq += d * d
	}
	mean := sum / n
	cv := math.Sqrt(sq/n-mean*mean) / mean
	// The mean's standard error is 0.3/√n ≈ 0.1 %; allow 1 %.
	if math.Abs(mean/float64(200*time.Millisecond)-1) > 0.01 || math.Abs(cv-0.3) > 0.01 {
		t.Fatalf("-work 200ms -work-cv 0.3: mean %v, coefficient of variation %.3f", time.Duration(mean), cv)
	}
}
