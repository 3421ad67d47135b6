package engine

import "math"

// Warm-up (control_behavior warm_up, warm_up_pace) after the model of
// Guava's SmoothWarmingUp: an idle key stores permits, up to maxPermits;
// a stored permit above thresholdPermits is expensive (its interval rises
// linearly from the stable interval 1/qps at the threshold to
// coldFactor/qps at maxPermits), one below it costs the stable interval.
// So a key that has been idle for a while starts at qps/coldFactor, and
// as traffic spends the stored permits the rate rises to qps; spending
// them all from maxPermits down to the threshold takes warmUpPeriod. An
// idle key refills its store at maxPermits per warmUpPeriod.
//
// The bucket keeps next, the moment the next request may go, like the
// pacer: the warm-up only makes each request's interval longer while the
// store is full. The caller decides what a future slot means: wait for it
// (warm_up_pace) or admit only within a tolerance (warm_up).

// WarmModel is the curve of one quota, derived from qps, the cold factor
// and the period; intervals in ns.
type WarmModel struct {
	stable, cold float64 // ns per permit, warm and cold
	threshold    float64 // permits
	maxPermits   float64
	slope        float64 // ns per permit per permit above threshold
	coolDown     float64 // ns for an idle key to store one permit
}

func NewWarmModel(qps, coldFactor float64, period int64) WarmModel {
	m := WarmModel{stable: math.Min(1e9/qps, MaxFlowSeconds*1e9)}
	m.cold = m.stable * coldFactor
	p := float64(period)
	// The area under the interval curve between threshold and maxPermits
	// (a trapezoid) is the period; below the threshold lies half of it.
	m.threshold = 0.5 * p / m.stable
	m.maxPermits = m.threshold + 2*p/(m.stable+m.cold)
	m.slope = (m.cold - m.stable) / (m.maxPermits - m.threshold)
	m.coolDown = p / m.maxPermits
	return m
}

// interval is the cost in ns of the next permit when stored are held:
// 1/current rate.
func (m *WarmModel) interval(stored float64) float64 {
	if stored <= m.threshold {
		return m.stable
	}
	return m.stable + (stored-m.threshold)*m.slope
}

// cost is the time to spend n of the stored permits (the integral of the
// interval curve from stored-n to stored), plus the stable interval for
// each permit that is not stored.
func (m *WarmModel) cost(stored, n float64) float64 {
	fromStore := min(n, stored) // the builtin: math.Min is a call, and -0 or NaN cannot occur here
	var ns float64
	if above := stored - m.threshold; above > 0 {
		take := min(above, fromStore)
		// trapezoid between stored and stored-take
		ns = take * (m.interval(stored) + m.interval(stored-take)) / 2
		fromStore -= take
	}
	return ns + m.stable*(fromStore+(n-min(n, stored)))
}

// warmBucket is one key's warm-up state. A zero bucket is cold: the key
// has never been seen, as after a long idleness.
type warmBucket struct {
	next   int64   // ns: the next request may go at next; 0 = new
	stored float64 // permits stored
}

// sync brings the bucket to now: time beyond next, unused, stores permits.
func (b *warmBucket) sync(now int64, m *WarmModel) {
	if b.next == 0 {
		b.next, b.stored = now, m.maxPermits
		return
	}
	if now > b.next {
		b.stored = math.Min(m.maxPermits, b.stored+float64(now-b.next)/m.coolDown)
		b.next = now
	}
}

// take decides a request of n permits at now: wait is the time until its
// slot; it is admitted (and the slot taken) when wait <= tolerance,
// otherwise retry is the time until it would be.
func (b *warmBucket) take(now int64, n float64, m *WarmModel, tolerance int64) (wait int64, ok bool, retry int64) {
	b.sync(now, m)
	wait = b.next - now
	if wait > tolerance {
		return wait, false, wait - tolerance
	}
	b.spend(n, m)
	return wait, true, 0
}

// spend takes the slot of a request of n permits from a synced bucket and
// returns the next slot and the interval of the permit after it.
func (b *warmBucket) spend(n float64, m *WarmModel) (next, interval int64) {
	b.next += int64(math.Ceil(m.cost(b.stored, n)))
	b.stored -= min(n, b.stored)
	return b.next, int64(m.interval(b.stored))
}

// rate is the admitted rate in requests per second the bucket allows at
// its current store (for tests and /sluice/state).
func (b *warmBucket) rate(m *WarmModel) float64 {
	return 1e9 / m.interval(b.stored)
}

// ColdSlots are the slots (ns after the first request) the warm-up model
// gives n requests that all arrive at once on a cold key: what the
// cluster's script reproduces for the fleet.
func ColdSlots(qps, coldFactor float64, period int64, n int) []int64 {
	m := NewWarmModel(qps, coldFactor, period)
	var b warmBucket
	b.sync(1, &m)
	slots := make([]int64, n)
	for i := range slots {
		slots[i] = b.next - 1
		b.take(1, 1, &m, 1<<62)
	}
	return slots
}
