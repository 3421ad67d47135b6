package ratelimit

import (
	"math"
	"slices"
	"testing"
	"time"
)

// BenchmarkAdaptiveSimSurvey runs the simulation's cases over 20 seeds
// (the tests run simSeeds) and logs, per case, the range seen and how
// many seeds missed the goals: in flight within [0.7 C, 1.3 C] after the
// capacity halves, at most 3 % refused in front of a healthy upstream; and
// how soon in flight follows a capacity that doubles. It
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
		for _, c := range simDoublingCases {
			var took []int64
			for seed := int64(1); seed <= seeds; seed++ {
				took = append(took, simDoubling(c, seed))
			}
			slices.Sort(took)
			b.Logf("service %v, C %d → %d: seconds until in flight reaches 0.9 C over 2 s: median %d, slowest %d (all %v; %d: not within 30 s)",
				time.Duration(c.service), c.before, c.after, took[seeds/2], took[seeds-1], took, simDoublingNever)
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

// simDoublingCases: the capacity doubles; the settle and bound fields are
// not used.
var simDoublingCases = []simHalvingCase{
	{service: 2 * ms, before: 20, after: 40}, {service: 20 * ms, before: 10, after: 20},
	{service: 200 * ms, before: 10, after: 20}, {service: 200 * ms, before: 5, after: 10},
}

// simDoublingNever stands for a run where in flight did not reach 0.9 C
// within 30 s of the capacity doubling.
const simDoublingNever = 99

// simDoubling runs c for seed and returns the seconds from the step until
// in flight, averaged over 2 s, first reaches 0.9 of the new capacity.
func simDoubling(c simHalvingCase, seed int64) int64 {
	at := 12 + seed*7%20 // seconds
	m := simNoisy(simModel{clients: 60, service: c.service, dur: (at + 30) * sec,
		capacity: []simStep{{0, c.before}, {at * sec, c.after}}})
	res := simulate(newGradient(simConfig(c.service), sec), m, seed, sec)
	for s := at; s+2 <= at+30; s++ {
		if mean(res.inflight[s:s+2]) >= 0.9*float64(c.after) {
			return s - at
		}
	}
	return simDoublingNever
}
