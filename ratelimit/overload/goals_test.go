package overload

import (
	"testing"
)

func simConfig() Config {
	return Config{MinLimit: 3, MaxLimit: 1000, InitialLimit: 20, Tolerance: 0.05,
		SampleWindow: 250 * ms, MinRTTInterval: 30 * sec, MaxQueueWait: 500 * ms, MaxQueued: 1000}
}

// TestSimCapacityHalves: after the upstream's capacity halves, the
// requests in flight at it are back within [0.7 C, 1.3 C] within 10 s, and
// after it doubles again the limit regains it, at 20 ms and 200 ms, in at
// least 95 % of seeds.
func TestSimCapacityHalves(t *testing.T) {
	seeds := int64(20)
	if testing.Short() {
		seeds = 4
	}
	for _, work := range []int64{20 * ms, 200 * ms} {
		bad := 0
		for seed := int64(1); seed <= seeds; seed++ {
			m := simModel{sources: []simSource{{class: Normal, keys: 1, clients: 60}}, work: work, noise: 0.3,
				cpus: []simStep{{0, 20}, {20 * sec, 10}, {40 * sec, 20}}, dur: 60 * sec, cfg: simConfig()}
			r := simulate(m, seed, true)
			// In flight averaged over 2 s spans, from 10 s after each step.
			ok := true
			for s := 30; s < 40; s += 2 {
				if v := (r.inflight[s] + r.inflight[s+1]) / 2; v < 7 || v > 13 {
					ok = false
				}
			}
			for s := 50; s < 60; s += 2 {
				if v := (r.inflight[s] + r.inflight[s+1]) / 2; v < 14 || v > 26 {
					ok = false
				}
			}
			if !ok {
				bad++
				t.Logf("work %v seed %d: in flight %.1f limits %v", work/ms, seed, r.inflight, r.limits)
			}
		}
		if float64(bad) > 0.05*float64(seeds) {
			t.Errorf("work %d ms: %d of %d seeds out of band", work/ms, bad, seeds)
		}
	}
}

// TestSimFastUpstreamSharesCPU is the first thing an operator tries: a fast
// upstream on the gateway's own host, 64 clients. The limit finds a small
// concurrency (every request in flight slows the host), and the rest wait
// rather than being refused: a refusal costs the host half a request.
func TestSimFastUpstreamSharesCPU(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		m := simModel{sources: []simSource{{class: Normal, keys: 1, clients: 64}}, work: 100 * us, noise: 0.3,
			cpus: []simStep{{0, 2}}, refuseWork: 0.5, dur: 10 * sec, cfg: simConfig()}
		base := simulate(m, seed, false)
		r := simulate(m, seed, true)
		good := float64(r.total(r.served)) / float64(base.total(base.served))
		refused := float64(r.total(r.refused)) / float64(r.total(r.asked))
		t.Logf("seed %d: goodput %.3f of no cap, refused %.4f, limits %v", seed, good, refused, r.limits)
		if good < 0.95 || refused > 0.01 {
			t.Errorf("seed %d: goodput %.3f (want ≥ 0.95), refused %.4f (want ≤ 0.01)", seed, good, refused)
		}
	}
}
