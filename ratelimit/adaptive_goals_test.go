package ratelimit

import (
	"math"
	"testing"
	"time"
)

// simConfig is the adaptive configuration the simulation gives an upstream
// of the given service time: the defaults, with windows of several round
// trips (as docs/ratelimit.md advises) once the service time is long.
func simConfig(service int64) AdaptiveConfig {
	cfg := AdaptiveConfig{MinLimit: DefaultMinLimit, MaxLimit: DefaultMaxLimit, InitialLimit: DefaultInitialLimit,
		Tolerance: DefaultLatencyTolerance, SampleWindow: int64(DefaultSampleWindow), MinRTTInterval: int64(DefaultMinRTTInterval)}
	if service >= 100*ms { // the example's settings (examples/protect-downstream)
		cfg.MinLimit, cfg.InitialLimit, cfg.MaxLimit = 4, 8, 200
	}
	cfg.SampleWindow = max(cfg.SampleWindow, 5*service/2)
	if service >= sec {
		cfg.MinRTTInterval = 300 * sec
	}
	return cfg
}

// simNoisy is the trouble every simulated run meets: service times with a
// coefficient of variation of 0.3, up to 1 ms inside the gateway each way,
// a stall of the gateway of up to 60 ms every 2 s on average, and 2 % of
// the clients giving up on their request after 1 to 4 service times.
func simNoisy(m simModel) simModel {
	m.noise, m.gatewayDelay, m.stallEvery, m.stallMax, m.cancelShare = 0.3, ms, 2*sec, 60*ms, 0.02
	return m
}

const simSeeds = 4

// After the upstream's capacity halves, with 60 closed-loop clients, from
// a limit that followed the capacity before. The goal is in flight within
// [0.7 C, 1.3 C] within 10 s for service times of 20 ms and 200 ms; this
// asserts it on 4 seeds (2 s: wider bounds, within 60 s), and logs the
// range seen (docs/ratelimit.md gives it per case over held-out seeds:
// the goal is not met at every seed). In flight is the upstream's, averaged over
// spans of max(2 s, 10 service times); every span from the settling time
// after the step to 20 s (2 s: 120 s) after it is checked, in every seed.
// The step comes at a time that differs by seed, so it meets the periodic
// minRTT measurement at every phase.
func TestAdaptiveSimFollowsCapacityHalving(t *testing.T) {
	for _, c := range simHalvingCases {
		worst := [2]float64{math.Inf(1), 0}
		for seed := int64(1); seed <= simSeeds; seed++ {
			ratios, at, res := simHalving(c, seed)
			for i, ratio := range ratios {
				worst[0], worst[1] = min(worst[0], ratio), max(worst[1], ratio)
				if ratio < c.lo || ratio > c.hi {
					t.Errorf("service %v, C %d → %d at %d s, seed %d: %.2f C in flight in span %d after settling; want within [%.1f C, %.1f C] (limits %v)",
						time.Duration(c.service), c.before, c.after, at, seed, ratio, i, c.lo, c.hi, res.limits[at-2:])
					break
				}
			}
		}
		t.Logf("service %v, C %d → %d: in flight %.2f–%.2f C from %d s after the step", time.Duration(c.service), c.before, c.after, worst[0], worst[1], c.settle)
	}
}

// simHalvingCase is one capacity halving the simulation checks, and the
// bounds (in C) the test asserts on it.
type simHalvingCase struct {
	service, before, after, settle int64
	lo, hi                         float64
}

var simHalvingCases = []simHalvingCase{
	// These 4 seeds read 1.13–1.28 C, 1.03–1.24 C, 0.87–1.18 C,
	// 0.89–1.20 C and 1.11–1.23 C: at 20 ms and 200 ms the bounds are the
	// goal. Over 20 seeds (BenchmarkAdaptiveSimSurvey) they read
	// 1.20–1.43 C, 0.99–1.23 C, 0.73–1.32 C, 0.84–1.37 C and 0.73–1.30 C:
	// the goal is not met in every seed (docs/ratelimit.md).
	{2 * ms, 40, 20, 10, 1.1, 1.5}, {20 * ms, 20, 10, 10, 0.7, 1.3}, {200 * ms, 20, 10, 10, 0.7, 1.3},
	{200 * ms, 10, 5, 10, 0.7, 1.3}, {2 * sec, 20, 10, 60, 0.6, 1.45},
}

// simHalving runs c for seed and returns in flight (in C after the step)
// over each span from the settling time to the end of the check, the
// step's time (s) and the whole run.
func simHalving(c simHalvingCase, seed int64) (ratios []float64, at int64, res simResult) {
	span, check := max(2, 10*c.service/sec), int64(20)
	at = 12 + seed*7%20 // seconds
	if c.service >= sec {
		check, at = 120, 100+seed*37%120
	}
	runFor := at + check
	m := simNoisy(simModel{clients: 60, service: c.service, dur: runFor * sec,
		capacity: []simStep{{0, c.before}, {at * sec, c.after}}})
	res = simulate(newGradient(simConfig(c.service), sec), m, seed, sec)
	for s := at + c.settle; s+span <= runFor; s += span {
		ratios = append(ratios, mean(res.inflight[s:s+span])/float64(c.after))
	}
	return ratios, at, res
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// In front of a healthy upstream (no capacity limit), the share of the
// requests of 60 closed-loop clients refused over the whole run from a
// fresh start (the first minRTT measurement at initial_limit and slow
// start included; a refused client comes back after a service time, not
// at once): 8 s for 2 to 200 ms, 120 s for 2 s. The goal, <= 3 %, holds in
// every case here; of the survey's seeds 1–180, all but two at 20 ms
// (3.1–3.2 %). The first round trip, where most refusals were, now waits
// for slow start's first step (adaptive_firstround.go): 200 ms and 2 s
// refuse nothing in any of those seeds.
func TestAdaptiveSimHealthyUpstreamRefusesLittle(t *testing.T) {
	for _, c := range []struct {
		service int64
		most    float64
	}{{2 * ms, 0.03}, {20 * ms, 0.03}, {200 * ms, 0.03}, {2 * sec, 0.03}} {
		worst := 0.0
		for seed := int64(1); seed <= simSeeds; seed++ {
			res := simHealthy(c.service, seed)
			worst = max(worst, res.refusedShare())
			if res.refusedShare() > c.most {
				t.Errorf("service %v, seed %d: %.1f %% refused (%d of %d); want <= %.1f %% (limits %v)", time.Duration(c.service), seed,
					100*res.refusedShare(), res.refused, res.admitted+res.refused, 100*c.most, res.limits)
			}
		}
		t.Logf("service %v: at most %.2f %% refused", time.Duration(c.service), 100*worst)
	}
}

// simHealthy runs 60 clients against an upstream of unlimited capacity
// from a fresh start: 8 s, or 120 s for a service time of 1 s or more.
func simHealthy(service, seed int64) simResult {
	dur := 8 * sec
	if service >= sec {
		dur = 120 * sec
	}
	m := simNoisy(simModel{clients: 60, service: service, dur: dur})
	return simulate(newGradient(simConfig(service), sec), m, seed, sec)
}
