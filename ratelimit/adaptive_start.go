package ratelimit

import "slices"

// The start-up of the adaptive limit: the first round trip is admitted up
// to initial_limit (not min_limit, as a probe would), and minRTT is taken
// from that first wave of requests, those admitted before the first
// answer came back, when it shows no queue. Admitted into an idle
// upstream, the wave's requests found it in the order they were admitted,
// which is their in-flight count n: those with n up to the upstream's
// capacity met no queue, the later ones queued behind them. So the lower
// half of the wave by n is clean whenever the upper half is (a queue
// starts at some n and grows with it): if the upper half's mean latency is
// within the tolerance of the lower half's, the lower half's samples make
// minRTT. Otherwise the upstream is past its capacity already: the probe
// at min_limit measures minRTT as before, and slow start goes on from
// initial_limit. With initial_limit under 2 × slowStartRound the wave is
// too small to read and the start is the probe alone.

// startSpan: the wave's samples are taken until this many times the first
// answer's latency after that answer; a request of the wave admitted
// without a queue is back by then.
const startSpan = 3

// waveSample is one finished request of the first wave.
type waveSample struct{ n, rtt int64 }

// readWave returns the minRTT samples of the wave (sorted by n in place)
// and the largest n in it, or ok false if its upper half's mean latency
// is over× its lower half's or the lower half has fewer than
// slowStartRound samples.
func readWave(wave []waveSample, over float64, samples []int64) (lower []int64, served int64, ok bool) {
	slices.SortFunc(wave, func(a, b waveSample) int { return int(a.n - b.n) })
	half := len(wave) / 2
	if half < slowStartRound {
		return nil, 0, false
	}
	var lo, hi float64
	for i, s := range wave {
		if i < half {
			lo += float64(s.rtt)
		} else {
			hi += float64(s.rtt)
		}
	}
	if hi/float64(len(wave)-half) > over*lo/float64(half) {
		return nil, 0, false
	}
	lower = samples[:0]
	for _, s := range wave[:half] {
		lower = append(lower, s.rtt)
	}
	return lower, wave[len(wave)-1].n, true
}

// observeStart records one finished request while the first wave is
// measured, and ends the start-up once the wave is back.
func (g *gradient) observeStart(start, now, inflight int64, drop bool) {
	c := &g.cfg
	if drop || start < g.measureStart {
		return
	}
	if g.firstAt == 0 {
		g.firstAt, g.firstRTT = now, now-start
	}
	if start < g.firstAt && len(g.wave) < maxWindowSamples {
		g.wave = append(g.wave, waveSample{n: inflight, rtt: now - start})
	}
	if now < g.firstAt+startSpan*g.firstRTT && len(g.wave) < maxWindowSamples {
		return
	}
	samples, served, ok := readWave(g.wave, 1+c.Tolerance, g.samples)
	g.starting, g.wave = false, nil
	if ok {
		// No queue: slow start goes on from twice the wave (at least
		// initial_limit), as after a round trip that found the limit
		// full without a queue.
		g.est = min(max(float64(c.InitialLimit), 2*float64(served)), float64(c.MaxLimit))
		g.samples = samples
		g.measured(now)
		return
	}
	// A queue, or too few requests to tell: the probe at min_limit.
	g.samples = g.samples[:0]
	g.measuring, g.measureStart = true, now
	g.limit.Store(c.MinLimit)
}
