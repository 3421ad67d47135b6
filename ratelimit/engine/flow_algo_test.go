package engine

import (
	"math"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func TestPacerSpacesRequestsAndRefusesBeyondMaxWait(t *testing.T) {
	var p pacer
	now := 10 * sec
	interval := 10 * ms // 100 qps
	maxWait := 35 * ms
	// A burst of 6 at one instant: slots 0, 10, 20, 30 ms wait; 40 ms is
	// beyond max_queue_wait and is refused, told to come back in 5 ms.
	for i := int64(0); i < 4; i++ {
		wait, ok, _ := p.take(now, interval, maxWait)
		if !ok || wait != i*interval {
			t.Fatalf("request %d: ok=%v wait=%v, want %v", i, ok, time.Duration(wait), time.Duration(i*interval))
		}
	}
	wait, ok, retry := p.take(now, interval, maxWait)
	if ok || wait != 40*ms || retry != 5*ms {
		t.Fatalf("5th: ok=%v wait=%v retry=%v, want refused, retry 5ms", ok, time.Duration(wait), time.Duration(retry))
	}
	// Coming back after Retry-After fits exactly.
	if wait, ok, _ := p.take(now+retry, interval, maxWait); !ok || wait != maxWait {
		t.Fatalf("retry: ok=%v wait=%v", ok, time.Duration(wait))
	}
	// After idleness the schedule starts at now: no credit is saved up, so
	// there is never a pulse.
	later := now + 10*sec
	for i := int64(0); i < 3; i++ {
		if wait, _, _ := p.take(later, interval, maxWait); wait != i*interval {
			t.Fatalf("after idle %d: wait %v", i, time.Duration(wait))
		}
	}
	if got := p.remaining(later, interval, maxWait); got != 1 {
		t.Fatalf("remaining %d, want 1 (the 30ms slot)", got)
	}
}

// TestWarmUpRateCurve checks the warm-up curve: a cold key starts at
// qps/cold_factor, the rate rises while it is used at full speed, reaches
// qps after warm_up_period, and an idle key cools down again.
func TestWarmUpRateCurve(t *testing.T) {
	const qps, cold = 100.0, 3.0
	period := 10 * sec
	m := NewWarmModel(qps, cold, period)
	var b warmBucket
	now := 5 * sec
	b.sync(now, &m)
	if r := b.rate(&m); math.Abs(r-qps/cold) > 0.01 {
		t.Fatalf("cold rate %.2f, want %.2f", r, qps/cold)
	}
	// Take every slot as soon as it comes (a pacing client that always has
	// work): record the rate at each second.
	var rates []float64
	next := now + sec
	for now < 5*sec+15*sec {
		wait, ok, _ := b.take(now, 1, &m, 0)
		if !ok || wait != 0 {
			t.Fatalf("at %v: slot not free (wait %v)", time.Duration(now), time.Duration(wait))
		}
		now = b.next
		if now >= next {
			rates = append(rates, b.rate(&m))
			next += sec
		}
	}
	for i := 1; i < len(rates); i++ {
		if rates[i] < rates[i-1]-1e-9 {
			t.Fatalf("rate fell while warming: %v", rates)
		}
	}
	// Spending the stored permits above the threshold takes the period:
	// warm (qps) a little before 10 s, certainly at 11 s, not yet at 8 s.
	if rates[7] > 0.95*qps {
		t.Fatalf("warm too early: rate at 8s %.1f (%v)", rates[7], rates)
	}
	if rates[10] < qps-1e-6 {
		t.Fatalf("not warm after the period: rate at 11s %.1f (%v)", rates[10], rates)
	}
	// The average over the period is between the cold and the warm rate.
	// Idle for a whole period: cold again.
	b.sync(now+period+sec, &m)
	if r := b.rate(&m); math.Abs(r-qps/cold) > 0.01 {
		t.Fatalf("rate after idle %.2f, want cold %.2f", r, qps/cold)
	}
	// A short idleness (a quarter of the period) stores permits below the
	// threshold only: still warm. Three quarters: half-way cold (the
	// interval is the mean of the warm and cold ones: 50 qps).
	var c warmBucket
	c.next, c.stored = 1, 0
	c.sync(1+period/4, &m)
	if r := c.rate(&m); math.Abs(r-qps) > 1e-6 {
		t.Fatalf("rate after a quarter period idle %.2f, want %v", r, qps)
	}
	c.next, c.stored = 1, 0
	c.sync(1+period*3/4, &m)
	if r := c.rate(&m); math.Abs(r-50) > 0.01 {
		t.Fatalf("rate after three quarters of the period idle %.2f, want 50", r)
	}
}

// TestWarmUpToleranceScalesTheBurst: in warm_up (refusing) mode a cold key
// lets through about burst/cold_factor at once, a warm one burst.
func TestWarmUpToleranceScalesTheBurst(t *testing.T) {
	m := NewWarmModel(100, 3, 10*sec)
	tolerance := CeilNanos(99.0 / 100) // burst 100, cost 1
	count := func(b *warmBucket, now int64) int {
		n := 0
		for {
			if _, ok, _ := b.take(now, 1, &m, tolerance); !ok {
				return n
			}
			n++
		}
	}
	var cold warmBucket
	if n := count(&cold, 5*sec); n < 30 || n > 40 {
		t.Fatalf("cold burst %d, want about 100/3", n)
	}
	warm := warmBucket{next: 5 * sec, stored: 0}
	if n := count(&warm, 5*sec); n != 100 {
		t.Fatalf("warm burst %d, want 100", n)
	}
}

// simUpstream simulates an upstream with capacity workers that each take
// base ns per request: a request admitted with n in flight takes
// base×max(1, n/capacity) (Little's law for a saturated queue).
type simUpstream struct {
	capacity int64
	base     int64
}
