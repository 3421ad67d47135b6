package rulestore

import "github.com/sluicegw/sluice/rulestore/status"

// RejectedView is the value stored for a rule that this instance rejected
// (status.RejectedView).
type RejectedView = status.RejectedView

// Rejected returns the stored value of a rule that this instance rejected
// (the rule in force, if any, is the last good version), or nil.
func (a *App) Rejected(k Kind, id string) *RejectedView {
	if a.redis == nil {
		return nil
	}
	return a.redis.RejectedRule(k, id)
}
