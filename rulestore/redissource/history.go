package redissource

import (
	"context"
	"github.com/sluicegw/sluice/rulestore"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/rulestore/history"
)

// HistoryKey is the history list of rule id of kind k.
func (n keyNames) HistoryKey(k rulestore.Kind, id string) string {
	return n.prefix + history.KeyPrefix + k.String() + ":" + id
}

// queueHistory queues an entry written by the admin API (dedupe false) or
// seen by an instance (dedupe true).
func (s *redisSource) queueHistory(ctx context.Context, p redis.Pipeliner, e history.Entry, dedupe bool) {
	k, _ := rulestore.ParseKind(e.Kind)
	history.Push(ctx, p, s.names.HistoryKey(k, e.ID), e, dedupe)
}

// queueObserved queues the history entry of a change seen in Redis. On a
// Redis Cluster the rule hash and the list are in different slots, so one
// script cannot read both: there the entry is checked against the newest
// entry only (a late instance may record a change again).
func (s *redisSource) queueObserved(ctx context.Context, p redis.Pipeliner, e history.Entry) {
	if _, cluster := s.client.(*redis.ClusterClient); cluster {
		s.queueHistory(ctx, p, e, true)
		return
	}
	k, _ := rulestore.ParseKind(e.Kind)
	history.PushObserved(ctx, p, s.names.HistoryKey(k, e.ID), s.names.RuleKey(k, e.ID), e)
}

// history reads a rule's history, newest first.
func (s *redisSource) history(ctx context.Context, k rulestore.Kind, id string) ([]history.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	return history.Read(ctx, s.client, s.names.HistoryKey(k, id))
}

// staticRule returns the newest config's static rule for (k, id), or nil:
// the Redis source validates an overlay against it.
func (s *redisSource) staticRule(k rulestore.Kind, id string) *rulestore.Rule {
	a := s.app.Load()
	if a == nil {
		return nil
	}
	return a.Static(k, id)
}
