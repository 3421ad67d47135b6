package grayroute

import (
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/rulestore"
)

// A verdict: the analysis judges an interval's totals and one instance
// writes the action into the rule.

// fleetGiveUp: an interval this instance could not judge for this many
// intervals past its due time is left to the others (its counts join the
// next interval this instance judges).
const fleetGiveUp = 10

// judge judges one interval and writes its verdict; false when it cannot
// yet (the fleet's counts are not complete or Redis failed), to be tried
// again at the next tick.
func (h *analysisHub) judge(store *rulestore.App, c *canary, p *pendingInterval, now time.Time) bool {
	var (
		rep       IntervalReport
		action    Action
		newWeight uint32
	)
	if client := store.Client(); client != nil {
		done, judged := h.judgeFleet(store, client, c, p, now, &rep, &action, &newWeight)
		if !done || !judged {
			return done
		}
	} else {
		v := c.analysis.Observe(&p.local, p.weight)
		rep = newReport(p, &v, now, "local")
		action, newWeight = v.Action, v.Weight
	}
	observeVerdict(c, &rep)
	if action != Hold {
		h.write(store, c, p, &rep, action, newWeight)
	}
	c.mu.Lock()
	if len(c.history) >= historyLength {
		c.history = append(c.history[:0], c.history[1:]...)
	}
	c.history = append(c.history, rep)
	c.mu.Unlock()
	if rulestore.ShouldEmit(EventAnalysis) {
		rulestore.Emit(EventAnalysis, verdictEvent(c, &rep, rep.Scope))
	}
	return true
}

func newReport(p *pendingInterval, v *Verdict, now time.Time, scope string) IntervalReport {
	rep := IntervalReport{Interval: p.idx, At: now.UTC(), Outcome: v.Outcome.String(), Action: v.Action.String(),
		Weight: percent(p.weight), NewWeight: percent(v.Weight), Scope: scope, Reason: v.Reason(), Verdict: *v}
	rep.CanaryLatency, rep.BaselineLatency = finite(rep.CanaryLatency), finite(rep.BaselineLatency)
	return rep
}

// judgeFleet judges interval p on the fleet's analysis in Redis (see
// analysis_fleet.go). done: p needs no more tries; judged: rep, action
// and newWeight hold its verdict (false when a later interval another
// instance judged already took p in, or this instance gave up on it).
func (h *analysisHub) judgeFleet(store *rulestore.App, client redis.UniversalClient, c *canary, p *pendingInterval, now time.Time,
	rep *IntervalReport, action *Action, newWeight *uint32) (done, judged bool) {
	logger := h.logger.Load()
	key, ttl := fleetKey(store, c), fleetTTL(c)
	fail := func(what string, err error) (bool, bool) {
		if now.After(p.due.Add(fleetGiveUp * c.interval)) {
			logger.Warn("canary analysis: gave up judging an interval; another instance judges it, or its counts join the next",
				zap.String("rule", c.rule), zap.Int64("interval", p.idx), zap.Error(err))
			return true, false
		}
		if !p.logged && !errors.Is(err, errNotReady) {
			p.logged = true
			logger.Warn("canary analysis: "+what+" failed; trying again", zap.String("rule", c.rule),
				zap.Int64("interval", p.idx), zap.Error(err))
		}
		return false, false
	}
	ctx, cancel := h.callContext(max(c.interval/4, 100*time.Millisecond))
	defer cancel()
	timedOut := !now.Before(p.due.Add(c.interval / 4))
	st, s, err := beginJudging(ctx, client, key, p.idx, timedOut, ttl)
	if err != nil {
		return fail("reading the fleet's counts", err)
	}
	if st != nil && st.Interval >= p.idx {
		if st.Interval > p.idx {
			return true, false
		}
		*rep, *action, *newWeight = st.Report, st.Action, st.NewWeight
		rep.At, rep.Written = now.UTC(), false
		return true, true
	}
	cfg := c.analysis.cfg
	var (
		a     = NewAnalysis(cfg)
		taken [2]VersionCounts
		start = p.idx
		prior = int64(-1)
	)
	if st != nil {
		prior, taken = st.Interval, st.Taken
		if st.Interval >= c.resumedIdx { // else: resumed since, the evidence starts afresh
			a, start = restoreAnalysis(cfg, &st.Analysis), st.Start
		}
	}
	counts := IntervalCounts{Canary: since(&s.sum[canarySide], &taken[canarySide]),
		Baseline: since(&s.sum[baselineSide], &taken[baselineSide])}
	v := a.Observe(&counts, p.weight)
	*rep = newReport(p, &v, now, "fleet")
	rep.Instances, rep.MissingReports = s.instances, s.missing
	next := fleetState{Interval: p.idx, Taken: s.sum, Analysis: a.snapshot(), Start: start,
		Action: v.Action, NewWeight: v.Weight, Report: *rep}
	ok, err := commitJudged(ctx, client, key, prior, &next, ttl)
	if err != nil {
		return fail("writing the fleet's analysis", err)
	}
	if !ok {
		return false, false // another instance judged first: adopt its verdict at the next tick
	}
	*action, *newWeight = v.Action, v.Weight
	return true, true
}

// write writes a verdict's action into the rule: a compare-and-set on the
// weight and state the interval was counted at, so one instance's write
// wins.
func (h *analysisHub) write(store *rulestore.App, c *canary, p *pendingInterval, rep *IntervalReport, action Action, weight uint32) {
	logger := h.logger.Load()
	patch := rulestore.Fields{"weight": formatWeight(weight)}
	switch action {
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
			zap.String("rule", c.rule), zap.String("action", action.String()), zap.Error(err))
	} else if ok {
		logger.Info("canary analysis verdict written", zap.String("rule", c.rule),
			zap.String("action", action.String()), zap.String("weight", formatWeight(weight)), zap.String("reason", rep.Reason))
		switch action {
		case Rollback:
			rulestore.Emit(EventRolledBack, verdictEvent(c, rep, "analysis"))
		case Promote:
			rulestore.Emit(EventPromoted, verdictEvent(c, rep, "analysis"))
		}
	}
}

// expectFields are the fields a verdict's compare-and-set checks: the
// weight and state the interval was counted at.
func expectFields(f rulestore.Fields) rulestore.Fields {
	return rulestore.Fields{"weight": f["weight"], "state": f["state"]}
}
