package rulestore

import "github.com/sluicegw/sluice/rulestore/status"

// Overview is what the status page's overview shows beyond /sluice/state
// (status.Overview).
type Overview = status.Overview

// PropagationTotals are a histogram's count and sum since the process
// started (status.PropagationTotals).
type PropagationTotals = status.PropagationTotals

// Overview returns the store's part of the status page's overview.
func (a *App) Overview() Overview {
	out := Overview{LiveInstances: a.LiveInstances(), Skipped: []InvalidRule{}}
	out.Propagation = propagationDelay.Totals()
	if a.redis != nil {
		out.Skipped = append(out.Skipped, a.redis.Skipped()...)
	}
	return out
}
