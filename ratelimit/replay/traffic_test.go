package replay

import (
	"cmp"
	"container/heap"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

// request is one generated request: its key, arrival, cost and how long
// it stays in flight when admitted.
type request struct {
	key  []byte
	at   int64
	cost int64
	dur  int64
}

// traffic generates n seeded requests over span ns from t0 on keys keys:
// popularity Zipf-like, arrivals bursty (a quiet rate, with one second
// in five at ten times it), costs 1 to 4 when costly.
func traffic(seed uint64, keys, n int, t0, span int64, costly bool) []request {
	return trafficSkewed(seed, keys, n, t0, span, costly, 1.1)
}

// trafficSkewed is traffic with Zipf exponent skew (> 1), or keys
// equally likely (skew 0).
func trafficSkewed(seed uint64, keys, n int, t0, span int64, costly bool, skew float64) []request {
	if raceOn {
		keys, n = keys/2, n/2
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	names := make([][]byte, keys)
	for i := range names {
		names[i] = []byte("user:" + strconv.Itoa(i))
	}
	pick := func() uint64 { return rng.Uint64N(uint64(keys)) }
	if skew > 1 {
		pick = rand.NewZipf(rng, skew, 4, uint64(keys-1)).Uint64
	}
	// Weights per second: bursty seconds carry 10× the traffic.
	secs := int(span / int64(time.Second))
	weights := make([]float64, secs)
	total := 0.0
	for i := range weights {
		weights[i] = 1
		if rng.IntN(5) == 0 {
			weights[i] = 10
		}
		total += weights[i]
	}
	reqs := make([]request, 0, n)
	for s, w := range weights {
		m := int(float64(n) * w / total)
		for range m {
			at := t0 + int64(s)*int64(time.Second) + rng.Int64N(int64(time.Second))
			cost := int64(1)
			if costly {
				cost = 1 + rng.Int64N(4)
			}
			reqs = append(reqs, request{key: names[pick()], at: at, cost: cost,
				dur: int64(time.Millisecond) * (1 + rng.Int64N(400))})
		}
	}
	sortRequests(reqs)
	return reqs
}

func sortRequests(reqs []request) {
	slices.SortStableFunc(reqs, func(a, b request) int { return cmp.Compare(a.at, b.at) })
}

// live decides reqs with the real local engines of a list (every rule
// must admit; those before a refusal are refunded, as the handler does),
// holding in-flight slots until each request's end. It records every
// request in rec (when not nil) and returns the outcome of each.
func live(specs []*engine.Spec, reqs []request, rec *Recorder) []bool {
	engs := make([]*engine.Local, len(specs))
	for i, s := range specs {
		engs[i] = engine.NewLocal(s)
	}
	var flight endHeap
	keyIn := make(map[string]int64)
	var total int64
	out := make([]bool, len(reqs))
	for i, q := range reqs {
		for len(flight) > 0 && flight[0].end <= q.at {
			f := heap.Pop(&flight).(ending)
			for j := range f.ds {
				engs[j].Release(&f.ds[j])
			}
			keyIn[f.key]--
			total--
		}
		a := Arrival{At: q.at, Cost: q.cost, KeyInFlight: keyIn[string(q.key)], TotalInFlight: total}
		ds := make([]engine.Decision, len(specs))
		ok := true
		for j, s := range specs {
			ds[j] = engs[j].TakeCost(s, q.key, q.at, q.cost)
			if ds[j].OK() {
				continue
			}
			ok = false
			a.Outcome = outcomeOf(ds[j].Reason)
			for k := range j {
				engs[k].Release(&ds[k])
				engs[k].Settle(specs[k], q.key, q.at, -q.cost)
			}
			break
		}
		out[i] = ok
		if ok {
			heap.Push(&flight, ending{end: q.at + q.dur, key: string(q.key), ds: ds})
			keyIn[string(q.key)]++
			total++
		}
		if rec != nil {
			rec.Record(q.key, a)
		}
	}
	return out
}

func outcomeOf(r engine.Reason) Outcome {
	switch r {
	case engine.Allowed:
		return Allowed
	case engine.RateLimited:
		return RateRefused
	case engine.TooManyInFlight:
		return InFlightRefused
	case engine.TooManyInFlightTotal:
		return InFlightTotalRefused
	}
	return OtherRefused
}

type ending struct {
	end int64
	key string
	ds  []engine.Decision
}

type endHeap []ending

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(ending)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// tokenBucket is a token bucket rule of qps and burst.
func tokenBucket(qps, burst float64) *engine.Spec {
	s := &engine.Spec{Type: engine.TokenBucket, Cost: 1, MaxKeys: 1 << 20,
		Limits: engine.Limits{QPS: qps, Burst: burst}}
	s.Idle = s.Limits.Idle(s.Type)
	return s
}

// slidingWindow is a sliding window rule of max per window.
func slidingWindow(max float64, window time.Duration) *engine.Spec {
	s := &engine.Spec{Type: engine.SlidingWindow, Cost: 1, MaxKeys: 1 << 20,
		Limits: engine.Limits{Window: int64(window), Max: max, QPS: max / window.Seconds()}}
	s.Idle = s.Limits.Idle(s.Type)
	return s
}

// calendarMinute is a calendar quota of max per UTC minute.
func calendarMinute(max float64) *engine.Spec {
	return &engine.Spec{Type: engine.Calendar, Cost: 1, MaxKeys: 1 << 20,
		Limits:   engine.Limits{Max: max},
		Calendar: &engine.CalendarQuota{Period: engine.PeriodMinute, Zone: time.UTC},
		Idle:     int64(engine.PeriodMinute.Longest())}
}

// direct compares two runs' outcomes request by request: how many each
// refused, and how many the second newly refused and newly allowed.
func direct(before, after []bool) (refBefore, refAfter, newlyRefused, newlyAllowed int64) {
	for i := range before {
		if !before[i] {
			refBefore++
		}
		if !after[i] {
			refAfter++
		}
		if before[i] && !after[i] {
			newlyRefused++
		}
		if !before[i] && after[i] {
			newlyAllowed++
		}
	}
	return
}
