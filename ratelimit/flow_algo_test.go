package ratelimit

import (
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/sluicegw/sluice/rulestore"
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
	m := newWarmModel(qps, cold, period)
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
	m := newWarmModel(100, 3, 10*sec)
	tolerance := ceilNanos(99.0 / 100) // burst 100, cost 1
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

// runGradient drives g with a demand far above capacity for dur, from
// now, in 1 ms steps, and returns the limit over the last second (min,
// max) and the new now.
func runGradient(g *gradient, up *simUpstream, now, dur int64) (lo, hi int64, end int64) {
	type req struct{ start, done, n int64 }
	var flight []req
	lo, hi = math.MaxInt64, 0
	for end = now + dur; now < end; now += ms {
		kept := flight[:0]
		for _, r := range flight {
			if r.done <= now {
				g.observe(r.start, now, r.n, false)
			} else {
				kept = append(kept, r)
			}
		}
		flight = kept
		for int64(len(flight)) < g.Limit() {
			n := int64(len(flight)) + 1
			lat := up.base * max(n, up.capacity) / up.capacity
			flight = append(flight, req{start: now, done: now + lat, n: n})
		}
		if now > end-sec {
			lo, hi = min(lo, g.Limit()), max(hi, g.Limit())
		}
	}
	return lo, hi, now
}

// TestGradientFindsAndFollowsCapacity is the controller alone against a
// simulated upstream (no wall clock): the limit converges near the
// upstream's capacity, and follows it when the capacity halves. It settles
// at capacity plus the headroom (log10 of the limit, at least 1: 44 for 40,
// 22 for 20, 6 for 5), not at (1+tolerance)×capacity + headroom as the
// plain gradient did (51, 26, 7).
func TestGradientFindsAndFollowsCapacity(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 3, MaxLimit: 1000, InitialLimit: 20, Tolerance: 0.25,
		SampleWindow: 250 * ms, MinRTTInterval: 30 * sec}
	up := &simUpstream{capacity: 40, base: 20 * ms}
	now := 5 * sec
	g := newGradient(cfg, now)
	lo, hi, now := runGradient(g, up, now, 10*sec)
	st := g.state()
	if lo < 40 || hi > 48 || st.MinRTT != 0.02 {
		t.Fatalf("C=40: limit %d..%d over the last second, minRTT %v; want within [40, 48] and 20ms", lo, hi, st.MinRTT)
	}
	up.capacity = 20
	lo, hi, now = runGradient(g, up, now, 10*sec)
	if lo < 20 || hi > 24 {
		t.Fatalf("C=20: limit %d..%d, want within [20, 24]", lo, hi)
	}
	// Across a minRTT re-measurement (every 30 s) the limit comes back.
	lo, hi, now = runGradient(g, up, now, 15*sec)
	if lo < 20 || hi > 24 || g.state().MinRTT != 0.02 {
		t.Fatalf("after re-measuring: limit %d..%d, minRTT %v", lo, hi, g.state().MinRTT)
	}
	// At a small capacity the headroom of 1 is one request more.
	up.capacity = 5
	if lo, hi, _ = runGradient(g, up, now, 10*sec); lo < 5 || hi > 6 {
		t.Fatalf("C=5: limit %d..%d, want within [5, 6]", lo, hi)
	}
}

// runWorkers drives g with the example's load: capacity workers serving
// first come first served, work ns each, requests arriving at random at 3×
// capacity and refused when the limit is reached. Unlike simUpstream,
// workers that start together finish together, so a queued request waits
// up to a whole work time: a median of latencies does not see a queue of
// less than half the requests. It returns the mean in flight and the
// p99 latency over the second half of dur.
func runWorkers(g *gradient, rng *rand.Rand, capacity int, work, now, dur int64) (inflight float64, p99 int64) {
	type req struct{ start, done, n int64 }
	var busy, queue []req
	var lat []int64
	var area float64
	arrive := now
	step := ms / 2
	for end := now + dur; now < end; now += step {
		measured := now >= end-dur/2
		kept := busy[:0]
		for _, r := range busy {
			if r.done > now {
				kept = append(kept, r)
				continue
			}
			g.observe(r.start, now+rng.Int63n(ms), r.n, false) // up to 1 ms of the gateway's own
			if measured {
				lat = append(lat, now-r.start)
			}
		}
		busy = kept
		for len(busy) < capacity && len(queue) > 0 {
			r := queue[0]
			queue = queue[1:]
			r.done = now + work
			busy = append(busy, r)
		}
		for arrive <= now {
			arrive += int64(float64(work) / float64(3*capacity) * (0.5 + rng.Float64()))
			if n := int64(len(busy) + len(queue)); n < g.Limit() {
				r := req{start: now, n: n + 1}
				if len(busy) < capacity {
					r.done = now + work
					busy = append(busy, r)
				} else {
					queue = append(queue, r)
				}
			}
		}
		if measured {
			area += float64(len(busy)+len(queue)) * float64(step)
		}
	}
	slices.Sort(lat)
	return area / float64(dur/2), lat[len(lat)*99/100]
}

// TestGradientSettlesNearCapacityWithWorkers: against workers (the
// example's upstream, simulated) the limit settles near capacity at small
// and large capacities alike, and when the capacity halves, so the p99
// stays below 2× the work time. The plain gradient with a median settles
// at about 1.4 C here for 10 and 5, as it did in the example (1.37–1.6 C).
func TestGradientSettlesNearCapacityWithWorkers(t *testing.T) {
	for _, c := range []int{10, 40} {
		rng := rand.New(rand.NewSource(int64(c)))
		cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 1000, InitialLimit: 8, Tolerance: 0.25,
			SampleWindow: 250 * ms, MinRTTInterval: 30 * sec}
		work := 200 * ms
		g := newGradient(cfg, 0)
		now := int64(0)
		for _, capacity := range []int{c, c / 2} {
			n, p99 := runWorkers(g, rng, capacity, work, now, 10*sec)
			now += 10 * sec
			if ratio := n / float64(capacity); ratio < 0.9 || ratio > 1.25 || p99 >= 2*work {
				t.Errorf("C=%d: %.2f C in flight, p99 %.2f× work; want within [0.9 C, 1.25 C] and < 2×",
					capacity, ratio, float64(p99)/float64(work))
			}
		}
	}
}

// An upstream whose work itself became slower (no queue: 1.4× the
// latency at any concurrency) looks like overload to the first window: the
// limit is cut once, but what the upstream serves falls with the limit,
// which a queue's does not, so minRTT is measured again and the limit
// grows back to max_limit (capacity to spare) instead of shrinking window
// after window until the next scheduled measurement.
func TestGradientRemeasuresWhenLatencyIsNoQueue(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 3, MaxLimit: 200, InitialLimit: 100, Tolerance: 0.25,
		SampleWindow: 100 * ms, MinRTTInterval: time.Hour.Nanoseconds()}
	up := &simUpstream{capacity: 1000, base: 10 * ms}
	now := sec
	g := newGradient(cfg, now)
	_, _, now = runGradient(g, up, now, 2*sec)
	if l := g.Limit(); l != 200 {
		t.Fatalf("capacity to spare: limit %d, want max_limit 200 (%+v)", l, g.state())
	}
	up.base = 14 * ms
	lo, _, _ := runGradient(g, up, now, 3*sec)
	if st := g.state(); lo != 200 || st.MinRTT != 0.014 {
		t.Fatalf("work 1.4× slower: limit %d at least over the last second, %+v; want max_limit 200 and minRTT 14ms", lo, st)
	}
}

func TestGradientBacksOffOnDropsAndIgnoresIdleness(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 2, MaxLimit: 100, InitialLimit: 50, Tolerance: 0.25,
		SampleWindow: 100 * ms, MinRTTInterval: 60 * sec}
	now := sec
	g := newGradient(cfg, now)
	for i := 0; i < minRTTSamples; i++ {
		g.observe(now, now+10*ms, 1, false)
	}
	if g.Limit() != 50 || g.state().MinRTT != 0.01 {
		t.Fatalf("after measuring: %+v", g.state())
	}
	// Fast answers at low use: the limit does not grow (no demand to
	// tell).
	now += 20 * ms
	for i := 0; i < 20; i++ {
		now += 10 * ms
		g.observe(now-10*ms, now, 3, false)
	}
	if g.Limit() != 50 {
		t.Fatalf("idle rule grew to %d", g.Limit())
	}
	// Two windows of 5xx with fast latency: each backs off by 10%.
	for i := 0; i < 20; i++ {
		now += 10 * ms
		g.observe(now-ms, now, 40, true)
	}
	if g.Limit() != 40 {
		t.Fatalf("after drops: %d, want 50×0.9×0.9", g.Limit())
	}
	// configure keeps the estimate within new bounds.
	cfg.MaxLimit = 30
	g.configure(cfg)
	if g.Limit() != 30 {
		t.Fatalf("after lowering max_limit: %d", g.Limit())
	}
}

// A rule with an absurdly low or high qps keeps its schedule arithmetic in
// range (no overflow into the past).
func TestFlowExtremeRates(t *testing.T) {
	for _, qps := range []string{"0.000001", "1e9"} { // the ends of qps's range
		for _, b := range []string{"pace", "warm_up", "warm_up_pace"} {
			f := rulestore.Fields{"qps": qps, "control_behavior": b, "key_resolver": "global"}
			if b != "pace" {
				f["warm_up_period"] = "24h"
			}
			r := mustRule(t, f)
			e := newLocalEngine(r)
			now := sec
			for i := 0; i < 3; i++ {
				d := e.Take(r, []byte("global"), now)
				if d.Wait < 0 || d.RetryAfter < 0 || d.Reset < 0 {
					t.Fatalf("%s qps %s take %d: %+v", b, qps, i, d)
				}
			}
		}
	}
}
