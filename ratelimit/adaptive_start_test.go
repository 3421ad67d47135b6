package ratelimit

import (
	"testing"
	"time"
)

// The start-up wave never makes a queued latency minRTT. An upstream past
// its capacity from the start (60 closed-loop clients against 5, 10 or 20
// workers) queues most of the wave; its upper half is slower than its
// lower half, so minRTT is measured by the probe at min_limit after the
// queue drained, and comes out at the service time, not at the 3 to 12
// service times the queued requests took. (In front of an upstream with
// capacity to spare the wave is read, and no probe refuses anyone:
// TestAdaptiveSimHealthyUpstreamRefusesLittle.)
func TestGradientStartWaveNeverTakesQueuedLatency(t *testing.T) {
	for _, c := range []struct{ service, capacity int64 }{
		{20 * ms, 20}, {20 * ms, 5}, {200 * ms, 10}, {200 * ms, 5}, {20 * ms, 0}, {200 * ms, 0},
	} {
		for seed := int64(1); seed <= simSeeds; seed++ {
			g := newGradient(simConfig(c.service), sec)
			m := simNoisy(simModel{clients: 60, service: c.service, dur: 30 * c.service,
				capacity: []simStep{{0, c.capacity}}})
			simulate(g, m, seed, sec)
			st := g.state()
			ratio := st.MinRTT * 1e9 / float64(c.service)
			if st.Measuring || ratio < 0.8 || ratio > 1.25 {
				t.Errorf("service %v, capacity %d (0: no limit), seed %d: %+v after %d service times; want minRTT measured within [0.8, 1.25] × the service time",
					time.Duration(c.service), c.capacity, seed, st, 30)
			}
		}
	}
}

// readWave takes the lower half of a wave by in-flight count when the
// upper half is as fast, and nothing when the upper half queued.
func TestReadWave(t *testing.T) {
	var flat, queued []waveSample
	for n := int64(40); n >= 1; n-- { // answers in any order: read by n
		rtt := 20*ms + n%3*ms
		flat = append(flat, waveSample{n: n, rtt: rtt})
		if n > 25 {
			rtt += 10 * ms // from n = 26 on the wave waited half a service time
		}
		queued = append(queued, waveSample{n: n, rtt: rtt})
	}
	lower, served, ok := readWave(flat, 1.25, nil)
	if !ok || len(lower) != 20 || served != 40 {
		t.Fatalf("flat wave: %d samples, served %d, ok %v; want its lower 20, 40, true", len(lower), served, ok)
	}
	// 15 of the upper half (n 26-40) 50 % slower: its mean 37.5 % above.
	if _, _, ok := readWave(queued, 1.25, nil); ok {
		t.Fatal("wave queued from n = 26: read as flat")
	}
	if _, _, ok := readWave(flat[:15], 1.25, nil); ok {
		t.Fatal("wave of 15: read, want the probe (fewer than 10 in its lower half)")
	}
}
