package grayroute

import (
	"time"

	"go.uber.org/zap"

	"github.com/sluicegw/sluice/rulestore"
)

// A verdict: the analysis judges an interval's totals and one instance
// writes the action into the rule.

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
