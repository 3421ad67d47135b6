package grayroute

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The simulation of a busy gateway: a service with a 10 ms median, and a
// canary of it 50 % slower in service time (15 ms). Two kinds of machine
// noise fall on both versions alike. The load of each interval makes the
// upstream's timers late (its own time × 1 to ×2, as in simLoad), and the
// gateway stalls: 5 % of requests wait another 20–150 ms in the gateway,
// after the upstream has answered. The analysis judges either the time
// around the proxy (service and both noises: what it measured before) or
// the upstream's own time (service and load).

// stalled is the CDF of Y + U with probability p, Y otherwise, for U
// uniform on [lo, hi] seconds (a stall of the gateway after the answer).
func stalled(cdf func(float64) float64, p, lo, hi float64) func(float64) float64 {
	const steps = 200
	return func(x float64) float64 {
		var s float64
		for i := range steps {
			u := lo + (hi-lo)*(float64(i)+0.5)/steps
			s += cdf(x - u)
		}
		return (1-p)*cdf(x) + p*s/steps
	}
}

// busyGateway are the per-interval latency pairs (baseline, canary) of a
// service with the baseline's median and the canary's, as judged at the
// upstream (upstream) or around the proxy.
func busyGateway(baseMedian, canaryMedian float64, upstream bool) [][2]*simLatency {
	var load [][2]*simLatency
	for _, f := range simLoad {
		b, c := logNormal(f*baseMedian, 0.5), logNormal(f*canaryMedian, 0.5)
		if !upstream {
			b, c = stalled(b, 0.05, 0.020, 0.150), stalled(c, 0.05, 0.020, 0.150)
		}
		load = append(load, [2]*simLatency{newSimLatencyCDF(b), newSimLatencyCDF(c)})
	}
	return load
}

// TestAnalysisCatchesASlowerServiceThroughGatewayStalls: 200 req/s, 1 s
// intervals, the canary at 20 %, the default tolerance (×1.2 or 5 ms) at
// p99; each run ends with a rollback or at 10,000 canary requests (plus
// the confirming interval). Judged around the proxy, the gateway's stalls
// make the p99 of both versions (~130 ms), and 5 ms more of service sits
// inside the tolerance: caught in under 10 % of 300 runs. Judged at the
// upstream, caught in at least 95 %. Identical versions (10 ms both) over
// as long are rolled back in at most 1 % of the runs either way.
func TestAnalysisCatchesASlowerServiceThroughGatewayStalls(t *testing.T) {
	t.Parallel()
	const runs = 300
	rate := func(load [][2]*simLatency, seed uint64) (caught int, at []uint64) {
		for i := range runs {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			s := simCanary{rps: 200, weight: 0.2, interval: 1, load: load, maxIntervals: 1 << 20,
				stopAfterCanary: 10000, intervalsAfterStopSeen: simConfig.FailureThreshold - 1}
			if res := s.run(rng, simConfig); res.rolledBackAt > 0 {
				caught++
				at = append(at, res.canaryReqs)
			}
		}
		slices.Sort(at)
		return caught, at
	}
	median := func(x []uint64) uint64 {
		if len(x) == 0 {
			return 0
		}
		return x[len(x)/2]
	}
	proxy, _ := rate(busyGateway(0.010, 0.015, false), 1)
	upstream, at := rate(busyGateway(0.010, 0.015, true), 2)
	sameProxy, _ := rate(busyGateway(0.010, 0.010, false), 3)
	sameUp, _ := rate(busyGateway(0.010, 0.010, true), 4)
	t.Logf("+50%% service time: caught judged around the proxy %d of %d, at the upstream %d of %d (median canary requests at the rollback %d); identical versions rolled back: %d and %d of %d",
		proxy, runs, upstream, runs, median(at), sameProxy, sameUp, runs)
	if proxy >= runs/10 || upstream < runs*95/100 || sameProxy > runs/100 || sameUp > runs/100 {
		t.Errorf("want under 10 around the proxy, at least 95 at the upstream, at most 1 identical each")
	}
}

// TestBusyGatewayModel: the model's p99 around the proxy is the stalls'
// (100–160 ms), against the service's own 32 ms.
func TestBusyGatewayModel(t *testing.T) {
	b := stalled(logNormal(0.010, 0.5), 0.05, 0.020, 0.150)
	lo, hi := 0.0, 1.0
	for range 60 {
		if mid := (lo + hi) / 2; b(mid) < 0.99 {
			lo = mid
		} else {
			hi = mid
		}
	}
	p99 := math.Round(hi * 1000)
	t.Logf("p99 around the proxy: %v ms (of the service alone: %.0f ms)", p99, 1000*0.010*math.Exp(0.5*2.326))
	if p99 < 100 || p99 > 160 {
		t.Fatalf("p99 around the proxy %v ms, want 100–160", p99)
	}
}
