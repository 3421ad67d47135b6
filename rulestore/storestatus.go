package rulestore

import "github.com/sluicegw/sluice/rulestore/status"

// Status describes the store: where rules come from and how fresh they are
// (status.Status).
type Status = status.Status

// PoolStatus counts the connections the store's Redis client holds
// (status.PoolStatus).
type PoolStatus = status.PoolStatus

// Status reports the store's state.
func (a *App) Status() Status {
	st := Status{Redis: a.redis != nil, Rules: map[string]int{}}
	for _, k := range Kinds() {
		st.Rules[k.String()] = a.Count(k)
	}
	if a.redis != nil {
		c := a.redis.Connection()
		st.Connected, st.Resyncs, st.Rejected = c.Connected, c.Resyncs, c.Rejected
		if !c.LastResync.IsZero() {
			t := c.LastResync.UTC()
			st.LastResync = &t
		}
		st.Pool = &c.Pool
	}
	return st
}
