package ratelimit

import (
	"math"
	"testing"
	"time"
)

// BenchmarkAdaptiveSimSurvey runs the simulation's cases over 20 seeds
// (the tests run simSeeds) and logs, per case, the range seen and how
// many seeds missed the goals: in flight within [0.7 C, 1.3 C] after the
// capacity halves, at most 3 % refused in front of a healthy upstream. It
// is the survey docs/ratelimit.md quotes; run it with
//
//	go test -run '^$' -bench AdaptiveSimSurvey -benchtime 1x ./ratelimit/
func BenchmarkAdaptiveSimSurvey(b *testing.B) {
	const seeds = 20
	for i := 0; i < b.N; i++ {
		for _, c := range simHalvingCases {
			lo, hi, missed := math.Inf(1), 0.0, 0
			for seed := int64(1); seed <= seeds; seed++ {
				ratios, _, _ := simHalving(c, seed)
				out := false
				for _, r := range ratios {
					lo, hi = min(lo, r), max(hi, r)
					out = out || r < 0.7 || r > 1.3
				}
				if out {
					missed++
				}
			}
			b.Logf("service %v, C %d → %d: in flight %.2f–%.2f C; %d of %d seeds outside [0.7 C, 1.3 C]",
				time.Duration(c.service), c.before, c.after, lo, hi, missed, seeds)
		}
		for _, service := range []int64{2 * ms, 20 * ms, 200 * ms, 2 * sec} {
			lo, hi, missed := math.Inf(1), 0.0, 0
			for seed := int64(1); seed <= seeds; seed++ {
				share := simHealthy(service, seed).refusedShare()
				lo, hi = min(lo, share), max(hi, share)
				if share > 0.03 {
					missed++
				}
			}
			b.Logf("service %v, healthy: %.1f–%.1f %% refused; %d of %d seeds above 3 %%",
				time.Duration(service), 100*lo, 100*hi, missed, seeds)
		}
	}
}
