package ratelimit

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkAdaptiveSimSurvey runs the simulation's cases over many seeds
// (the tests run simSeeds) and logs, per case, the range seen and how
// many seeds missed the goals: in flight within [0.7 C, 1.3 C] after the
// capacity halves, at most 3 % refused in front of a healthy upstream; and
// how soon in flight follows a capacity that doubles. It is the survey
// docs/ratelimit.md quotes: seeds 1-20 by default; SLUICE_SURVEY_SEEDS
// and SLUICE_SURVEY_FIRST choose others (a change is judged on seeds it
// was not tuned on). Cases run in parallel. Run it with -v (without it Go
// prints only the first ten lines of a benchmark's log):
//
//	go test -v -run '^$' -bench AdaptiveSimSurvey -benchtime 1x ./ratelimit/
func BenchmarkAdaptiveSimSurvey(b *testing.B) {
	seeds, first := surveyEnv(b, "SLUICE_SURVEY_SEEDS", 20), surveyEnv(b, "SLUICE_SURVEY_FIRST", 1)
	seedRange := func(f func(seed int64)) {
		for seed := first; seed < first+seeds; seed++ {
			f(seed)
		}
	}
	for i := 0; i < b.N; i++ {
		var jobs []func() string
		for _, c := range simHalvingCases {
			jobs = append(jobs, func() string {
				lo, hi, missed := math.Inf(1), 0.0, 0
				seedRange(func(seed int64) {
					ratios, _, _ := simHalving(c, seed)
					out := false
					for _, r := range ratios {
						lo, hi = min(lo, r), max(hi, r)
						out = out || r < 0.7 || r > 1.3
					}
					if out {
						missed++
					}
				})
				return fmt.Sprintf("service %v, C %d → %d: in flight %.2f–%.2f C; %d of %d seeds outside [0.7 C, 1.3 C]",
					time.Duration(c.service), c.before, c.after, lo, hi, missed, seeds)
			})
		}
		for _, c := range simDoublingCases {
			jobs = append(jobs, func() string {
				var took []int64
				seedRange(func(seed int64) { took = append(took, simDoubling(c, seed)) })
				slices.Sort(took)
				late := len(took) - sort.Search(len(took), func(i int) bool { return took[i] > 10 })
				return fmt.Sprintf("service %v, C %d → %d: seconds until in flight reaches 0.9 C over 2 s: median %d, slowest %d; %d seeds over 10 s (%d: not within 30 s)",
					time.Duration(c.service), c.before, c.after, took[len(took)/2], took[len(took)-1], late, simDoublingNever)
			})
		}
		for _, service := range []int64{2 * ms, 20 * ms, 200 * ms, 2 * sec} {
			jobs = append(jobs, func() string {
				lo, hi, missed := math.Inf(1), 0.0, 0
				seedRange(func(seed int64) {
					share := simHealthy(service, seed).refusedShare()
					lo, hi = min(lo, share), max(hi, share)
					if share > 0.03 {
						missed++
					}
				})
				return fmt.Sprintf("service %v, healthy: %.1f–%.1f %% refused; %d of %d seeds above 3 %%",
					time.Duration(service), 100*lo, 100*hi, missed, seeds)
			})
		}
		b.Logf("seeds %d to %d", first, first+seeds-1)
		for _, line := range runParallel(jobs) {
			b.Log(line)
		}
	}
}

// runParallel runs jobs on GOMAXPROCS goroutines and returns their results
// in order.
func runParallel(jobs []func() string) []string {
	out := make([]string, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = jobs[i]()
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// surveyEnv reads a positive integer from the environment, else def.
func surveyEnv(b *testing.B, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
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
