package grayroute

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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
//     adds the interval's counts to a hash shared by the fleet (HINCRBY, one
//     pipeline per rule and interval) and, a quarter interval later when
//     every instance has added its own, reads the fleet's totals; without
//     Redis it uses this instance's counts. A slow Redis delays only the
//     canary whose call it is, and every call has its own deadline, under
//     a context the hub cancels when it stops.
//   - Every instance feeds the same totals to its analysis and writes the
//     verdict into the rule through rulestore.Patch, a compare-and-set on
//     the rule's weight and state: one instance's write wins, the store
//     publishes it, and every instance routes by it within milliseconds.

// Event names.
const (
	EventAnalysis   = "gray_analysis"
	EventRolledBack = "gray_rolled_back"
	EventPromoted   = "gray_promoted"
)

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
	h := &analysisHub{}
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

// Cleanup releases the handler's hold on the hub.
func (h *Handler) Cleanup() error {
	if h.hub != nil {
		_, err := analysisPool.Delete(hubKey)
		h.hub = nil
		return err
	}
	return nil
}

// cohortCounts are one version's outcomes since the canary started,
// written by requests with atomic adds.
type cohortCounts struct {
	requests, errors atomic.Uint64
	latency          [NumLatencyBuckets]atomic.Uint64
}

func (c *cohortCounts) snapshot(v *VersionCounts) {
	v.Requests, v.Errors = c.requests.Load(), c.errors.Load()
	for i := range c.latency {
		v.Latency[i] = c.latency[i].Load()
	}
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
	last      [2]VersionCounts  // cumulative counts at the last flush
	pending   []pendingInterval // flushed, waiting to be judged
	lastState CanaryState

	mu      sync.Mutex // guards history and the fields below for state reports
	history []IntervalReport
	state   CanaryState
	weight  uint32
}

const (
	canarySide   = 0
	baselineSide = 1
)

type pendingInterval struct {
	idx   int64
	due   time.Time
	local IntervalCounts // this instance's counts (the totals without Redis)
	// The rule's weight and the fields a verdict's compare-and-set expects,
	// as they were when the interval closed: another instance may have
	// written this interval's verdict before this one judges it, and the
	// new weight must not be mistaken for the one the counts were taken at
	// (that would advance the canary twice on the same evidence).
	weight uint32
	expect rulestore.Fields
}

// IntervalReport is one interval's verdict with its numbers, as
// /sluice/state and the gray_analysis event show it.
type IntervalReport struct {
	Interval  int64     `json:"interval"`
	At        time.Time `json:"at"`
	Outcome   string    `json:"outcome"`
	Action    string    `json:"action"`
	Weight    float64   `json:"weight"`
	NewWeight float64   `json:"new_weight"`
	// Written: this instance wrote the action into the rule.
	Written bool   `json:"written"`
	Scope   string `json:"scope"` // fleet (Redis totals) or local
	Reason  string `json:"reason"`
	Verdict
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

// cohort returns the counters a request decided by g is counted in, or nil
// when it is not part of the analysis: analysis off, canary not running, a
// weight of 0 or 100 % (nothing to compare), or a request forced to a
// version rather than split by the hash.
func (h *Handler) cohort(g *Rule, canaryChosen, forced bool) *cohortCounts {
	if g.Analysis == nil || g.State != StateRunning || forced || h.hub == nil ||
		g.Weight == 0 || g.Weight >= Buckets {
		return nil
	}
	c := h.hub.canaryFor(g)
	if canaryChosen {
		return &c.counts[canarySide]
	}
	return &c.counts[baselineSide]
}

// serveCounted serves a request of an analysis cohort and counts its
// outcome: a 5xx response, or an error from the proxy (dial, upstream,
// timeout: Caddy's 502/503/504), is an error; a request the client gave up
// on is not counted at all.
func (h *Handler) serveCounted(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, c *cohortCounts) error {
	sw := h.hub.writers.Get().(*handlerkit.StatusWriter)
	sw.ResponseWriter, sw.Status = w, 0
	start := time.Now()
	err := next.ServeHTTP(sw, r)
	elapsed := time.Since(start)
	status := sw.Status
	sw.ResponseWriter = nil
	h.hub.writers.Put(sw)

	if r.Context().Err() != nil {
		return err // the client went away: says nothing about the version
	}
	if err != nil {
		status = http.StatusInternalServerError
		var he caddyhttp.HandlerError
		if errors.As(err, &he) && he.StatusCode != 0 {
			status = he.StatusCode
		}
		if status == 499 {
			return err
		}
	}
	c.requests.Add(1)
	if status >= 500 {
		c.errors.Add(1)
	}
	c.latency[LatencyBucket(elapsed)].Add(1)
	return err
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
		c.analysis = NewAnalysis(g.Analysis.AnalysisConfig)
	}
	c.lastState = g.State
	c.analysis.cfg = g.Analysis.AnalysisConfig
	if c.interval != g.Analysis.Interval {
		c.interval, c.idx, c.pending = g.Analysis.Interval, 0, nil
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
		if client := store.Client(); client != nil && g.State == StateRunning {
			if err := h.flush(store, client, c, &p); err != nil {
				h.logger.Load().Warn("canary analysis: adding this instance's counts to redis failed; the interval is judged without them",
					zap.String("rule", c.rule), zap.Error(err))
			}
		}
		if g.State == StateRunning {
			c.pending = append(c.pending, p)
		}
	}
	for len(c.pending) > 0 && !now.Before(c.pending[0].due) && h.ctx.Err() == nil {
		p := c.pending[0]
		c.pending = c.pending[1:]
		if g.State != StateRunning {
			c.pending = nil
			break
		}
		h.judge(store, c, &p, now)
	}
	return true
}

func diff(out, cur, last *VersionCounts) {
	out.Requests = cur.Requests - last.Requests
	out.Errors = cur.Errors - last.Errors
	for i := range out.Latency {
		out.Latency[i] = cur.Latency[i] - last.Latency[i]
	}
}

// fleetKey is the Redis hash adding up every instance's counts of one
// interval of one canary.
func fleetKey(store *rulestore.App, c *canary, idx int64) string {
	return store.KeyPrefix() + "gray_analysis:" + c.rule + ":" + c.target + ":" + c.fallback + ":" +
		strconv.FormatInt(c.interval.Milliseconds(), 10) + ":" + strconv.FormatInt(idx, 10)
}

// Fields of a fleet hash: cn, ce (canary requests and errors), bn, be
// (baseline), c<j> and b<j> (latency bucket j), only those not zero.
func (h *analysisHub) flush(store *rulestore.App, client redis.UniversalClient, c *canary, p *pendingInterval) error {
	if p.local.Canary.Requests == 0 && p.local.Baseline.Requests == 0 {
		return nil
	}
	ctx, cancel := h.callContext(max(c.interval/4, 100*time.Millisecond))
	defer cancel()
	key := fleetKey(store, c, p.idx)
	_, err := client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		add := func(field string, n uint64) {
			if n > 0 {
				pl.HIncrBy(ctx, key, field, int64(n))
			}
		}
		for side, v := range []*VersionCounts{&p.local.Canary, &p.local.Baseline} {
			pre := [...]string{"c", "b"}[side]
			add(pre+"n", v.Requests)
			add(pre+"e", v.Errors)
			for j, n := range v.Latency {
				add(pre+strconv.Itoa(j), n)
			}
		}
		pl.PExpire(ctx, key, 20*c.interval+time.Minute)
		return nil
	})
	return err
}

// fleetCounts reads the fleet's totals of one interval.
func fleetCounts(ctx context.Context, client redis.UniversalClient, key string) (IntervalCounts, error) {
	var out IntervalCounts
	m, err := client.HGetAll(ctx, key).Result()
	if err != nil {
		return out, err
	}
	for f, s := range m {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || len(f) < 2 {
			continue
		}
		v := &out.Canary
		if f[0] == 'b' {
			v = &out.Baseline
		}
		switch f[1:] {
		case "n":
			v.Requests = n
		case "e":
			v.Errors = n
		default:
			if j, err := strconv.Atoi(f[1:]); err == nil && j >= 0 && j < NumLatencyBuckets {
				v.Latency[j] = n
			}
		}
	}
	return out, nil
}

// judge feeds one interval to the analysis and writes its verdict.
func (h *analysisHub) judge(store *rulestore.App, c *canary, p *pendingInterval, now time.Time) {
	logger := h.logger.Load()
	counts, scope := p.local, "local"
	if client := store.Client(); client != nil {
		ctx, cancel := h.callContext(max(c.interval/4, 100*time.Millisecond))
		fleet, err := fleetCounts(ctx, client, fleetKey(store, c, p.idx))
		cancel()
		if err != nil {
			logger.Warn("canary analysis: reading the fleet's counts failed; judging this instance's own",
				zap.String("rule", c.rule), zap.Error(err))
		} else {
			counts, scope = fleet, "fleet"
		}
	}
	v := c.analysis.Observe(&counts, p.weight)
	rep := IntervalReport{Interval: p.idx, At: now.UTC(), Outcome: v.Outcome.String(), Action: v.Action.String(),
		Weight: percent(p.weight), NewWeight: percent(v.Weight), Scope: scope, Reason: v.Reason(), Verdict: v}
	observeVerdict(c, &rep)

	if v.Action != Hold {
		patch := rulestore.Fields{"weight": formatWeight(v.Weight)}
		switch v.Action {
		case Rollback:
			patch["state"] = StateRolledBack.String()
		case Promote:
			patch["state"] = StatePromoted.String()
		}
		ctx, cancel := h.callContext(max(c.interval, time.Second))
		ok, err := store.Patch(ctx, rulestore.Gray, c.rule, p.expect, patch)
		cancel()
		rep.Written = ok
		if err != nil {
			logger.Error("canary analysis: writing the verdict into the rule failed; the next interval tries again",
				zap.String("rule", c.rule), zap.String("action", v.Action.String()), zap.Error(err))
		} else if ok {
			logger.Info("canary analysis verdict written", zap.String("rule", c.rule),
				zap.String("action", v.Action.String()), zap.String("weight", formatWeight(v.Weight)), zap.String("reason", rep.Reason))
			switch v.Action {
			case Rollback:
				rulestore.Emit(EventRolledBack, verdictEvent(c, &rep, "analysis"))
			case Promote:
				rulestore.Emit(EventPromoted, verdictEvent(c, &rep, "analysis"))
			}
		}
	}
	c.mu.Lock()
	if len(c.history) >= historyLength {
		c.history = append(c.history[:0], c.history[1:]...)
	}
	c.history = append(c.history, rep)
	c.mu.Unlock()
	if rulestore.ShouldEmit(EventAnalysis) {
		rulestore.Emit(EventAnalysis, verdictEvent(c, &rep, scope))
	}
}

// expectFields are the fields a verdict's compare-and-set checks: the
// weight and state the interval was counted at.
func expectFields(f rulestore.Fields) rulestore.Fields {
	return rulestore.Fields{"weight": f["weight"], "state": f["state"]}
}

func verdictEvent(c *canary, rep *IntervalReport, source string) map[string]any {
	return map[string]any{
		"rule": c.rule, "target": c.target, "fallback": c.fallback, "interval": rep.Interval,
		"outcome": rep.Outcome, "action": rep.Action, "weight": rep.Weight, "new_weight": rep.NewWeight,
		"written": rep.Written, "source": source, "reason": rep.Reason,
		"canary_requests": rep.CanaryRequests, "canary_errors": rep.CanaryErrors,
		"baseline_requests": rep.BaselineRequests, "baseline_errors": rep.BaselineErrors,
		"canary_latency_seconds": rep.CanaryLatency, "baseline_latency_seconds": rep.BaselineLatency,
		"error_evidence": rep.ErrorEvidence, "latency_evidence": rep.LatencyEvidence, "fail_bound": rep.FailBound,
		"latency_limit_seconds": rep.LatencyLimit, "step_latency_evidence": rep.StepLatencyEvidence, "pass_bound": rep.PassBound,
	}
}

func percent(bp uint32) float64 { return float64(bp) / 100 }

// formatWeight writes basis points as the weight field's percentage.
func formatWeight(bp uint32) string { return strconv.FormatFloat(float64(bp)/100, 'f', -1, 64) }

// CanaryReport is one canary's part of /sluice/state.
type CanaryReport struct {
	Rule      string           `json:"rule"`
	Target    string           `json:"target"`
	Fallback  string           `json:"fallback"`
	State     string           `json:"state"`
	Weight    float64          `json:"weight"`
	Intervals []IntervalReport `json:"intervals"`
}

// analysisState lists every canary this process analyses.
func analysisState() []CanaryReport {
	out := []CanaryReport{}
	analysisPool.Range(func(_, v any) bool {
		h, ok := v.(*analysisHub)
		if !ok {
			return true
		}
		store := h.store.Load()
		h.canaries.Range(func(_, v any) bool {
			c := v.(*canary)
			c.mu.Lock()
			rep := CanaryReport{Rule: c.rule, Target: c.target, Fallback: c.fallback,
				State: c.state.String(), Weight: percent(c.weight), Intervals: append([]IntervalReport(nil), c.history...)}
			c.mu.Unlock()
			// The rule in force now, not as the hub last saw it.
			if r := store.Lookup(rulestore.Gray, c.rule); r != nil {
				if g, ok := r.Value.(*Rule); ok && g.Target == c.target && g.Fallback == c.fallback {
					rep.State, rep.Weight = g.State.String(), percent(g.Weight)
				}
			}
			out = append(out, rep)
			return true
		})
		return true
	})
	return out
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
