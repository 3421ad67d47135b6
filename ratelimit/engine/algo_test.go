package engine

import (
	"math/rand"
	"testing"
	"time"
)

const sec = int64(time.Second)

func TestTokenBucketBurstRefillCostRetryAfter(t *testing.T) {
	var b tokenBucket
	now := 10 * sec
	// qps 2, burst 5: exactly 5 pass at one instant.
	for i := 0; i < 5; i++ {
		if ok, left, _ := b.take(now, 2, 5, 1); !ok || left != float64(4-i) {
			t.Fatalf("take %d: ok=%v left=%v", i, ok, left)
		}
	}
	ok, _, wait := b.take(now, 2, 5, 1)
	if ok || wait != sec/2 {
		t.Fatalf("6th: ok=%v wait=%v, want refused with 500ms wait", ok, time.Duration(wait))
	}
	// After 499ms still no token; at 500ms one.
	if ok, _, _ := b.take(now+sec/2-int64(time.Millisecond), 2, 5, 1); ok {
		t.Fatal("admitted before refill")
	}
	if ok, _, _ := b.take(now+sec/2, 2, 5, 1); !ok {
		t.Fatal("not admitted after refill")
	}
	// requested_tokens 3 on an empty bucket: wait for 3 tokens = 1.5s.
	ok, _, wait = b.take(now+sec/2, 2, 5, 3)
	if ok || wait != 3*sec/2 {
		t.Fatalf("cost 3: ok=%v wait=%v, want 1.5s", ok, time.Duration(wait))
	}
	// A long idle period refills to burst, never beyond.
	if ok, left, _ := b.take(now+100*sec, 2, 5, 3); !ok || left != 2 {
		t.Fatalf("after idle: ok=%v left=%v, want 2 left", ok, left)
	}
	if got := b.untilFull(2, 5); got != 3*sec/2 {
		t.Fatalf("untilFull %v", time.Duration(got))
	}
}

func TestTokenBucketRateOverTime(t *testing.T) {
	var b tokenBucket
	admitted := 0
	// 10 s of a request every millisecond against qps 100 burst 10.
	for ms := int64(1); ms <= 10_000; ms++ {
		if ok, _, _ := b.take(sec+ms*int64(time.Millisecond), 100, 10, 1); ok {
			admitted++
		}
	}
	if admitted < 1000 || admitted > 1010 {
		t.Fatalf("admitted %d in 10s at qps 100 burst 10, want 1000..1010", admitted)
	}
}

func TestSlidingWindowBoundary(t *testing.T) {
	var w slidingWindow
	size := 10 * sec
	start := 100 * sec
	// 10 per 10s window, all at the start of a window.
	for i := 0; i < 10; i++ {
		if ok, _, _ := w.take(start, size, 10, 1); !ok {
			t.Fatalf("take %d refused", i)
		}
	}
	ok, left, wait := w.take(start+sec, size, 10, 1)
	if ok || left != 0 {
		t.Fatal("11th admitted")
	}
	// The next window starts at 110s with prev=10, weight 1: at 111s the
	// weight is 0.9, estimate 9, and one fits: 10s after 101s.
	if want := 10 * sec; wait != want {
		t.Fatalf("wait %v, want %v", time.Duration(wait), time.Duration(want))
	}
	if ok, _, _ := w.take(start+sec+wait-1, size, 10, 1); ok {
		t.Fatal("admitted before the wait")
	}
	if ok, _, _ := w.take(start+sec+wait, size, 10, 1); !ok {
		t.Fatal("refused after the wait")
	}
	// A gap of two windows forgets everything.
	for i := 0; i < 10; i++ {
		if ok, _, _ := w.take(start+40*sec, size, 10, 1); !ok {
			t.Fatalf("after gap: take %d refused", i)
		}
	}
}

// TestSlidingWindowAgainstExactLog runs random bursty traffic through the
// sliding-window counter and through an exact sliding log, and checks the
// counter against both its hard bound (no trailing window of the admitted
// requests holds more than 2×limit) and its typical accuracy (what it
// admits is close to what the exact log admits).
func TestSlidingWindowAgainstExactLog(t *testing.T) {
	const limit = 100
	size := 10 * sec
	rng := rand.New(rand.NewSource(1))
	for _, offered := range []float64{0.5, 1.2, 3} { // offered load ÷ limit
		var w slidingWindow
		var exact []int64    // admitted by the exact log limiter
		var admitted []int64 // admitted by the counter
		now := 1000 * sec
		var worst int
		for i := 0; i < 200_000; i++ {
			// Poisson arrivals whose rate drifts, so windows are uneven.
			rate := offered * limit / 10 * (1 + 0.8*sinLike(float64(i)/3000))
			now += int64(rng.ExpFloat64() / rate * 1e9)
			if ok, _, _ := w.take(now, size, limit, 1); ok {
				admitted = append(admitted, now)
			}
			if n := countSince(exact, now-size); n < limit {
				exact = append(exact, now)
			}
			if n := countSince(admitted, now-size); n > worst {
				worst = n
			}
		}
		if worst >= 2*limit {
			t.Errorf("load %.1f: a trailing window held %d admitted requests, bound is < %d", offered, worst, 2*limit)
		}
		diff := float64(len(admitted)-len(exact)) / float64(len(exact))
		t.Logf("load %.1f×: counter admitted %d, exact log %d (%+.2f%%), worst trailing window %d (limit %d)",
			offered, len(admitted), len(exact), 100*diff, worst, limit)
		if diff < -0.05 || diff > 0.05 {
			t.Errorf("load %.1f: counter admitted %+.1f%% vs exact log, want within 5%%", offered, 100*diff)
		}
	}
}

func sinLike(x float64) float64 { // a cheap periodic drift in [-1, 1]
	x -= float64(int64(x/4)) * 4
	if x < 2 {
		return x - 1
	}
	return 3 - x
}

// countSince counts timestamps after since in a sorted log.
func countSince(log []int64, since int64) int {
	lo, hi := 0, len(log)
	for lo < hi {
		m := (lo + hi) / 2
		if log[m] > since {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return len(log) - lo
}
