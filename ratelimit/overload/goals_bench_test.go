package overload

import (
	"slices"
	"testing"
)

// BenchmarkSimGoals reports the simulation's figures for the goals over
// seeds the tests do not use (21 onwards: the controller was not tuned on
// them), as the spread docs/performance.md quotes. The simulation is
// deterministic per seed, so one iteration is all:
//
//	go test -run '^$' -bench SimGoals -benchtime 1x ./ratelimit/overload/
func BenchmarkSimGoals(b *testing.B) {
	const first = 21
	b.Run("CapacityHalves", func(b *testing.B) {
		for b.Loop() {
			for _, work := range []int64{20 * ms, 200 * ms} {
				in := 0
				for seed := int64(first); seed < first+100; seed++ {
					if _, ok := capacityHalves(work, seed); ok {
						in++
					}
				}
				b.ReportMetric(float64(in), map[int64]string{20 * ms: "in-band-of-100@20ms", 200 * ms: "in-band-of-100@200ms"}[work])
			}
		}
	})
	b.Run("FastUpstream", func(b *testing.B) {
		for b.Loop() {
			var good, refused []float64
			for seed := int64(first); seed < first+20; seed++ {
				_, g, r := fastUpstream(seed)
				good, refused = append(good, g), append(refused, r)
			}
			report(b, "goodput", good)
			report(b, "refused", refused)
		}
	})
	b.Run("TwoClasses", func(b *testing.B) {
		for b.Loop() {
			var share, p99, p99Same, good []float64
			for seed := int64(first); seed < first+20; seed++ {
				_, f := twoClasses(seed)
				share, good = append(share, f.highShare), append(good, f.good)
				p99 = append(p99, float64(f.p99)/float64(f.p99Alone))
				p99Same = append(p99Same, float64(f.p99)/float64(f.p99Same))
			}
			report(b, "high-served", share)
			report(b, "high-p99/uncontended", p99)
			report(b, "high-p99/same-alone", p99Same)
			report(b, "goodput", good)
		}
	})
	b.Run("NoisyKey", func(b *testing.B) {
		for b.Loop() {
			var ratio, share []float64
			for seed := int64(first); seed < first+20; seed++ {
				q, n := noisyKey(seed)
				ratio = append(ratio, float64(p99Of(n.bySource[0]))/float64(p99Of(q.bySource[0])))
				left := simCapacity - float64(q.total(q.served))/30
				share = append(share, float64(n.keyServed[10])/30/left)
			}
			report(b, "others-p99/alone", ratio)
			report(b, "noisy/left", share)
		}
	})
}

// report adds the least, the median and the greatest of v as metrics.
func report(b *testing.B, name string, v []float64) {
	slices.Sort(v)
	b.ReportMetric(v[0], name+"-min")
	b.ReportMetric(v[len(v)/2], name+"-median")
	b.ReportMetric(v[len(v)-1], name+"-max")
}
