package ratelimit

import "testing"

// A minRTT read low (19 ms where the service answers in 23 ms, no
// capacity limit) put latency at 1.2 minRTT: within the tolerance, above
// the probe share, so the limit held at 40 with 60 clients and refused a
// third of the requests until the next probe, 30 s on. Seen on a real
// Caddy beside stress-ng (docs/ratelimit.md). Now a held limit tries a
// raise, the latency does not follow it, and minRTT is measured again: the
// limit meets the demand within seconds. The probe that measures it again
// has its own noise (± 6 % at two standard errors), and one that reads
// low leaves the limit growing gently for seconds, so this asserts over
// seeds 1-20: at least 19 meet the demand within 7 s refusing at most
// 20 %, and none refuses more than 25 %. Over seeds 1-100, 98 did (93
// when a probe took 25 samples whatever its concurrency: the first
// answers of a probe at 27 in flight are the fast ones, and read up to
// 14 % low), 9.8 % refused on average (12.2 %), the worst 27 % (46 %).
func TestGradientLowMinRTTDoesNotHoldAHealthyUpstream(t *testing.T) {
	met := 0
	for seed := int64(1); seed <= 20; seed++ {
		g, now := measured(simConfig(20*ms), 19*ms)
		g.slowStart = false
		g.minRTTN, g.minRTTErr = 45, 0.045 // as pooled from two probes
		g.nextMeasure = now + 30*sec
		g.est = 40
		g.limit.Store(40)
		res := simulate(g, simModel{clients: 60, service: 23 * ms, noise: 0.3, dur: 8 * sec}, seed, now)
		if res.limits[6] >= 60 && res.refusedShare() <= 0.2 {
			met++
		} else {
			t.Logf("seed %d: limit each second %v, %.1f %% refused", seed, res.limits, 100*res.refusedShare())
		}
		if res.refusedShare() > 0.25 {
			t.Errorf("seed %d: %.1f %% refused (limit each second %v); want at most 25 %%", seed, 100*res.refusedShare(), res.limits)
		}
		if st := g.state(); st.MinRTT < 0.020 {
			t.Errorf("seed %d: minRTT %v, want measured again (over 20 ms)", seed, st.MinRTT)
		}
	}
	if met < 19 {
		t.Errorf("%d of 20 seeds met the demand (60) within 7 s refusing at most 20 %%; want 19 or more", met)
	}
}

// At a real capacity (40 workers, 20 ms, minRTT right) the limit holds
// with its queue; the raises it tries meet latency that grows with them,
// are undone, and are tried less and less often: in flight stays within
// [0.7 C, 1.3 C] in every 2 s span.
func TestGradientExploringAtCapacityIsUndoneAndBacksOff(t *testing.T) {
	g, now := measured(simConfig(20*ms), 20*ms)
	g.slowStart = false
	g.minRTTN, g.minRTTErr = 100, 0.02
	g.nextMeasure = now + 30*sec
	g.est = 45
	g.limit.Store(45)
	res := simulate(g, simModel{clients: 60, service: 20 * ms, noise: 0.3, capacity: []simStep{{0, 40}}, dur: 30 * sec}, 1, now)
	for s := 0; s+2 <= len(res.inflight); s += 2 {
		if c := mean(res.inflight[s:s+2]) / 40; c < 0.7 || c > 1.3 {
			t.Fatalf("seconds %d-%d: %.2f C in flight, want within [0.7, 1.3] (each second %.1f, limits %v)", s, s+2, c, res.inflight, res.limits)
		}
	}
	if g.explore.after < 16 {
		t.Fatalf("after 30 s at capacity: a raise is tried every %d held windows, want backed off to 16 or more", g.explore.after)
	}
}
