package ratelimit

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// AdaptiveConfig is the gradient controller of max_concurrent adaptive.
type AdaptiveConfig struct {
	MinLimit, MaxLimit, InitialLimit int64
	// Tolerance: a sampled latency up to minRTT×(1+Tolerance) counts as
	// healthy (the limit grows); above it the limit shrinks.
	Tolerance float64
	// SampleWindow (ns): how often the limit is recomputed from the
	// latencies seen. MinRTTInterval (ns): how often the uncontended
	// latency is measured again.
	SampleWindow, MinRTTInterval int64
}

// minRTTSamples is how many requests, admitted at min_limit concurrency,
// make one minRTT measurement (their median).
const minRTTSamples = 25

// maxWindowSamples bounds the latencies kept per sample window; beyond it
// later ones overwrite earlier ones (memory stays fixed).
const maxWindowSamples = 1024

// dropShare: a window in which more than this share of requests failed
// (5xx or an upstream error) backs the limit off by backoff, whatever the
// latency. Rarer failures are taken for the application's own errors, not
// overload, so they do not starve the limit.
const (
	dropShare = 0.05
	backoff   = 0.9
)

// smoothing is the weight of a window's new limit against the old one: the
// latencies of a window come from requests admitted up to one RTT before,
// so taking the new value whole overshoots and oscillates.
const smoothing = 0.5

// gradient is one rule's adaptive in-flight limit, after Envoy's adaptive
// concurrency filter and Netflix's Gradient2: it measures the uncontended
// latency (minRTT) now and then by letting only MinLimit requests in
// flight, and every sample window moves the limit by the gradient
// minRTT×(1+tolerance)/sampleRTT (the window's median latency), clamped to
// [0.5, 2], plus a small headroom (log10 of the limit) that lets it probe
// upwards while latency is flat. While the upstream is healthy the
// gradient exceeds 1 and the limit grows; once requests queue in the
// upstream, latency rises and the limit settles where latency is about
// (1+tolerance)×minRTT, i.e. near the upstream's real capacity. The limit
// grows only while at least half of it is in use, so an idle rule does not
// drift to max_limit. Plain Go: times are ns passed in by the caller.
type gradient struct {
	limit atomic.Int64 // the admission limit in force now

	mu           sync.Mutex
	cfg          AdaptiveConfig
	est          float64 // the estimated limit (kept while minRTT is measured)
	minRTT       int64
	sampleRTT    int64 // the last window's median latency
	measuring    bool
	measureStart int64 // requests admitted before it do not count
	nextMeasure  int64
	windowEnd    int64
	samples      []int64
	seen, drops  int
	peak         int64 // most requests in flight seen in this window
}

func newGradient(cfg AdaptiveConfig, now int64) *gradient {
	g := &gradient{samples: make([]int64, 0, maxWindowSamples)}
	g.cfg = cfg
	g.est = float64(cfg.InitialLimit)
	g.startMeasure(now)
	return g
}

// configure applies a changed rule, keeping what was learnt.
func (g *gradient) configure(cfg AdaptiveConfig) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cfg == g.cfg {
		return
	}
	g.cfg = cfg
	g.est = math.Min(math.Max(g.est, float64(cfg.MinLimit)), float64(cfg.MaxLimit))
	if g.measuring {
		g.limit.Store(cfg.MinLimit)
	} else {
		g.limit.Store(int64(g.est))
	}
}

// Limit is the number of requests that may be in flight now.
func (g *gradient) Limit() int64 { return g.limit.Load() }

func (g *gradient) startMeasure(now int64) {
	g.measuring, g.measureStart = true, now
	g.samples, g.seen, g.drops, g.peak = g.samples[:0], 0, 0, 0
	g.limit.Store(g.cfg.MinLimit)
}

// observe records one finished request: admitted at start, ended at now,
// with inflight requests in flight when it was admitted; drop means it
// failed (5xx, upstream error). Client cancels are not observed at all.
func (g *gradient) observe(start, now, inflight int64, drop bool) {
	rtt := now - start
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.measuring {
		if start < g.measureStart || drop {
			return
		}
		g.samples = append(g.samples, rtt)
		if len(g.samples) >= minRTTSamples {
			g.minRTT = median(g.samples)
			g.measuring = false
			g.nextMeasure = now + g.cfg.MinRTTInterval
			g.windowEnd = now + g.cfg.SampleWindow
			g.samples, g.seen, g.drops, g.peak = g.samples[:0], 0, 0, 0
			g.limit.Store(int64(g.est))
		}
		return
	}
	g.peak = max(g.peak, inflight)
	if drop {
		g.drops++
	} else {
		if len(g.samples) < maxWindowSamples {
			g.samples = append(g.samples, rtt)
		} else {
			g.samples[g.seen%maxWindowSamples] = rtt
		}
		g.seen++
	}
	if now >= g.windowEnd {
		g.update(now)
	}
}

// update ends a sample window: it moves the limit, and starts a minRTT
// measurement when one is due.
func (g *gradient) update(now int64) {
	c := &g.cfg
	switch {
	case float64(g.drops) > dropShare*float64(g.drops+g.seen):
		g.est *= backoff
	case len(g.samples) > 0:
		g.sampleRTT = median(g.samples)
		grad := float64(g.minRTT) * (1 + c.Tolerance) / float64(g.sampleRTT)
		grad = math.Min(math.Max(grad, 0.5), 2)
		next := g.est*grad + math.Max(1, math.Log10(g.est))
		if next > g.est && float64(g.peak) < g.est/2 {
			next = g.est // not enough demand to tell whether more would do
		}
		g.est = g.est*(1-smoothing) + next*smoothing
	}
	g.est = math.Min(math.Max(g.est, float64(c.MinLimit)), float64(c.MaxLimit))
	g.windowEnd = now + c.SampleWindow
	g.samples, g.seen, g.drops, g.peak = g.samples[:0], 0, 0, 0
	if now >= g.nextMeasure {
		g.startMeasure(now)
		return
	}
	g.limit.Store(int64(g.est))
}

// AdaptiveState is the controller's state for /sluice/state.
type AdaptiveState struct {
	Limit     int64   `json:"limit"`
	Estimate  float64 `json:"estimate"`
	MinRTT    float64 `json:"min_rtt_seconds"`
	SampleRTT float64 `json:"sampled_rtt_seconds"`
	Measuring bool    `json:"measuring_min_rtt"`
}

func (g *gradient) state() AdaptiveState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return AdaptiveState{Limit: g.limit.Load(), Estimate: math.Round(g.est*100) / 100,
		MinRTT: float64(g.minRTT) / 1e9, SampleRTT: float64(g.sampleRTT) / 1e9, Measuring: g.measuring}
}

// median sorts s in place and returns its middle value.
func median(s []int64) int64 {
	slices.Sort(s)
	return s[len(s)/2]
}
