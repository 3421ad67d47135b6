package grayroute

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// The glue of the canary analysis (the decision is analysis.go):
//
//   - On the request path, a request the weighted hash sent to the canary
//     or the baseline of a rule with analysis on is timed and its outcome
//     counted in plain atomic counters (no lock, no allocation: the status
//     recorder is pooled).
//   - The hub (one per process, kept across reloads in a usage pool) runs
//     one goroutine per canary that has counted a request, none otherwise.
//     It closes each analysis interval on the wall clock: with Redis, it
//     writes this instance's cumulative counts into the canary's hash and,
//     a quarter interval later, judges the interval on the fleet's sealed
//     counts and analysis (analysis_fleet.go), so every instance shows the
//     same totals and verdict; without Redis it uses this instance's
//     counts. A slow Redis delays only the canary whose call it is, every
//     call has its own deadline, under a context the hub cancels when it
//     stops, and a failed call is tried again at the next tick.
//   - Every instance writes the verdict into the rule through
//     rulestore.Patch, a compare-and-set on the rule's weight and state:
//     one instance's write wins, the store publishes it, and every
//     instance routes by it within milliseconds.

// analysisPool holds the process's hub across config reloads.
var analysisPool = caddy.NewUsagePool()

const hubKey = "grayroute.analysis"

// hubTick is how often a canary's goroutine looks for finished intervals.
const hubTick = 20 * time.Millisecond

// historyLength is how many interval reports /sluice/state shows per canary.
const historyLength = 60

// idleCanary: a canary whose rule has not been seen with analysis on for
// this long is forgotten.
const idleCanary = 10 * time.Minute

type analysisHub struct {
	id       string // this process's name in the fleet's hashes
	store    atomic.Pointer[rulestore.App]
	logger   atomic.Pointer[zap.Logger]
	canaries sync.Map // canaryKey -> *canary
	writers  sync.Pool

	// ctx ends every canary's goroutine and Redis call; mu orders starting
	// a goroutine (wg.Add) before Destruct's cancel and wait.
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	running sync.WaitGroup
}

func newHub() (caddy.Destructor, error) {
	var b [8]byte
	rand.Read(b[:])
	h := &analysisHub{id: hex.EncodeToString(b[:])}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.writers.New = func() any { return new(handlerkit.StatusWriter) }
	return h, nil
}

// Destruct stops the hub when the last handler using it is cleaned up:
// every canary's goroutine ends, and a Redis call in flight is abandoned.
func (h *analysisHub) Destruct() error {
	h.mu.Lock()
	h.cancel()
	h.mu.Unlock()
	h.running.Wait()
	return nil
}

// attachHub gives a handler the process's hub; Cleanup releases it.
func (h *Handler) attachHub(store *rulestore.App, reg *prometheus.Registry, logger *zap.Logger) error {
	if err := h.checkInline(); err != nil {
		return err
	}
	v, _, err := analysisPool.LoadOrNew(hubKey, newHub)
	if err != nil {
		return err
	}
	h.hub = v.(*analysisHub)
	h.hub.store.Store(store)
	h.hub.logger.Store(logger)
	return initAnalysisMetrics(reg)
}

// Cleanup releases the handler's hold on its inline ids' counts and on
// the hub. h.hub stays set: requests still in flight after a reload use
// it (counting into a released hub is harmless), and Caddy cleans a
// module up once.
func (h *Handler) Cleanup() error {
	metrics.inline.release(h.inlineIDs)
	h.inlineIDs = nil
	if h.hub != nil {
		_, err := analysisPool.Delete(hubKey)
		return err
	}
	return nil
}

// canary is the analysis of one rule's target against its fallback.
type canary struct {
	rule, target, fallback string
	counts                 [2]cohortCounts // canarySide, baselineSide
	lastSeen               atomic.Int64    // unix ns the rule was last seen with analysis on
	followed               bool            // a goroutine follows it (guarded by the hub's mu)

	// Hub goroutine only.
	analysis  *Analysis
	interval  time.Duration
	idx       int64             // wall-clock interval being counted
	last      [2]VersionCounts  // cumulative counts at the last interval closed
	pending   []pendingInterval // closed, waiting to be judged
	lastState CanaryState
	// With Redis: this instance's counts of the intervals closed while
	// running, the last interval they cover, whether Redis has them yet,
	// and the interval at which the canary last resumed after a rollback
	// or promotion (the fleet's analysis starts afresh there).
	// The counts restart under a new epoch (a new field in the hash)
	// whenever the analysis does.
	sent       [2]VersionCounts
	epoch      int
	sentIdx    int64
	unsent     bool
	failedIdx  int64 // the interval whose failed write was last logged
	resumedIdx int64

	mu           sync.Mutex // guards history and the fields below for state reports
	history      []IntervalReport
	state        CanaryState
	weight       uint32
	missedWrites uint64 // writes of this instance's counts Redis did not take
}

const (
	canarySide   = 0
	baselineSide = 1
)

type pendingInterval struct {
	idx    int64
	due    time.Time
	local  IntervalCounts // this instance's counts (the totals without Redis)
	logged bool           // a failure to judge it was logged
	// The rule's weight and the fields a verdict's compare-and-set expects,
	// as they were when the interval closed: another instance may have
	// written this interval's verdict before this one judges it, and the
	// new weight must not be mistaken for the one the counts were taken at
	// (that would advance the canary twice on the same evidence).
	weight uint32
	expect rulestore.Fields
}

// canaryFor returns the canary a rule's requests are counted in. The
// pointer is cached on the parsed rule, so the request path looks it up
// once per rule version.
func (h *analysisHub) canaryFor(g *Rule) *canary {
	if c := g.Analysis.rec.Load(); c != nil {
		return c
	}
	key := g.ID + "\x00" + g.Target + "\x00" + g.Fallback
	v, ok := h.canaries.Load(key)
	if !ok {
		v, _ = h.canaries.LoadOrStore(key, &canary{rule: g.ID, target: g.Target, fallback: g.Fallback})
	}
	c := v.(*canary)
	h.watch(key, c)
	c.lastSeen.Store(time.Now().UnixNano())
	g.Analysis.rec.Store(c)
	return c
}

// watch starts c's goroutine, unless one runs or the hub has stopped,
// and forgets canaries nobody has followed for idleCanary.
func (h *analysisHub) watch(key string, c *canary) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.followed || h.ctx.Err() != nil {
		return
	}
	c.followed = true
	h.running.Add(1)
	go h.follow(key, c)
	idle := time.Now().UnixNano() - int64(idleCanary)
	h.canaries.Range(func(k, v any) bool {
		if o := v.(*canary); !o.followed && o.lastSeen.Load() < idle {
			h.canaries.Delete(k)
		}
		return true
	})
}

// follow closes and judges c's intervals while its rule has analysis on
// and the hub runs. The canary stays known (its counts, its history) for
// idleCanary; a request of its rule follows it again.
func (h *analysisHub) follow(key string, c *canary) {
	defer h.running.Done()
	t := time.NewTicker(hubTick)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case now := <-t.C:
			if h.step(c, now) {
				continue
			}
			h.mu.Lock()
			if _, g := h.inForce(c); g != nil { // back since step looked: keep following
				h.mu.Unlock()
				continue
			}
			c.followed = false
			h.mu.Unlock()
			return
		}
	}
}

// inForce returns c's rule when it is in force with analysis on.
func (h *analysisHub) inForce(c *canary) (*rulestore.Rule, *Rule) {
	r := h.store.Load().Lookup(rulestore.Gray, c.rule)
	if r == nil {
		return nil, nil
	}
	g, _ := r.Value.(*Rule)
	if g == nil || g.Analysis == nil || g.Target != c.target || g.Fallback != c.fallback {
		return nil, nil
	}
	return r, g
}

// callContext is the context of one Redis call: its own deadline, and
// cancelled when the hub stops.
func (h *analysisHub) callContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(h.ctx, d)
}

// step closes and judges c's finished intervals; false when c's rule is
// not in force with analysis on.
func (h *analysisHub) step(c *canary, now time.Time) bool {
	store := h.store.Load()
	r, g := h.inForce(c)
	if g == nil {
		return false
	}
	c.lastSeen.Store(now.UnixNano())
	c.mu.Lock()
	c.state, c.weight = g.State, g.Weight
	c.mu.Unlock()
	if c.analysis == nil || (g.State == StateRunning && c.lastState != StateRunning && c.lastState != StatePaused) {
		// A new canary, or one resumed after a rollback or promotion:
		// the evidence starts afresh.
		if c.analysis != nil {
			c.resumedIdx = now.UnixNano() / int64(max(c.interval, time.Millisecond))
		}
		c.analysis = NewAnalysis(g.Analysis.AnalysisConfig)
		c.newEpoch()
	}
	c.lastState = g.State
	c.analysis.cfg = g.Analysis.AnalysisConfig
	if c.interval != g.Analysis.Interval {
		c.interval, c.idx, c.pending = g.Analysis.Interval, 0, nil
		c.newEpoch()
	}
	iv := int64(c.interval)
	idx := now.UnixNano() / iv
	if c.idx == 0 {
		// The first interval counted (or the first at a new length) also
		// takes what was counted before it: c.last stays the counts at the
		// last flush (none for a new canary), so the requests a canary
		// served before this step are not lost.
		c.idx = idx
		return true
	}
	if idx > c.idx {
		var cum [2]VersionCounts
		p := pendingInterval{idx: c.idx,
			due:    time.Unix(0, idx*iv).Add(c.interval / 4),
			weight: g.Weight, expect: expectFields(r.Fields)}
		for side := range cum {
			c.counts[side].snapshot(&cum[side])
		}
		diff(&p.local.Canary, &cum[canarySide], &c.last[canarySide])
		diff(&p.local.Baseline, &cum[baselineSide], &c.last[baselineSide])
		c.last = cum
		c.idx = idx
		observeCounts(c, &p.local)
		if g.State == StateRunning {
			if store.Client() != nil {
				c.sent[canarySide].add(&p.local.Canary)
				c.sent[baselineSide].add(&p.local.Baseline)
				c.sentIdx, c.unsent = p.idx, true
			}
			c.pending = append(c.pending, p)
		}
	}
	if client := store.Client(); client != nil && c.unsent && g.State == StateRunning {
		h.report(store, client, c)
	}
	for len(c.pending) > 0 && !now.Before(c.pending[0].due) && h.ctx.Err() == nil {
		if g.State != StateRunning {
			c.pending = nil
			break
		}
		if !h.judge(store, c, &c.pending[0], now) {
			break // tried again at the next tick
		}
		c.pending = c.pending[1:]
	}
	return true
}

// newEpoch restarts this instance's counts in the fleet's hash under a
// new field: the old one keeps what it held, so the fleet's sums never
// go back.
func (c *canary) newEpoch() {
	c.sent, c.unsent = [2]VersionCounts{}, false
	c.epoch++
}

// report writes this instance's counts into the fleet's hash; a failure
// is counted, logged once per interval and tried again at the next tick.
func (h *analysisHub) report(store *rulestore.App, client redis.UniversalClient, c *canary) {
	ctx, cancel := h.callContext(max(c.interval/4, 100*time.Millisecond))
	err := reportCounts(ctx, client, fleetKey(store, c), h.id+"."+strconv.Itoa(c.epoch), c.sentIdx, &c.sent, fleetTTL(c))
	cancel()
	if err == nil {
		c.unsent = false
		return
	}
	c.mu.Lock()
	c.missedWrites++
	c.mu.Unlock()
	analysisMetrics.missed.WithLabelValues(c.rule).Inc()
	if c.failedIdx != c.sentIdx {
		c.failedIdx = c.sentIdx
		h.logger.Load().Warn("canary analysis: writing this instance's counts to redis failed; trying again until a later write replaces it",
			zap.String("rule", c.rule), zap.Int64("interval", c.sentIdx), zap.Error(err))
	}
}

// checkInline refuses analysis on an inline rule: its verdicts could not
// be written anywhere (the rule lives in this handler's config only).
func (h *Handler) checkInline() error {
	for i, g := range h.inline {
		if g != nil && g.Analysis != nil {
			return fmt.Errorf("inline gray rule %q: analysis needs the rule in the rule store (the global rulestore block or Redis), where its verdicts are written", h.Rules[i].ID)
		}
	}
	return nil
}

// diff is cur less last, one interval's counts of a version.
func diff(out, cur, last *VersionCounts) {
	out.Requests = cur.Requests - last.Requests
	out.Errors = cur.Errors - last.Errors
	for i := range out.Latency {
		out.Latency[i] = cur.Latency[i] - last.Latency[i]
	}
}
