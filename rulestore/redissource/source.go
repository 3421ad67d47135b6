package redissource

import (
	"context"
	"encoding/json"
	"github.com/sluicegw/sluice/rulestore"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/rulestore/history"
)

// What the app asks of the Redis source (RedisSource).

// Layer is the rules held from Redis.
func (s *redisSource) Layer() *rulestore.Layer { return s.snap.Load() }

// Changes moves after every store to the layer or one of its slots.
func (s *redisSource) Changes() uint64 { return s.changes.Load() }

// Name is "redis".
func (s *redisSource) Name() string { return "redis" }

// Start records app as the newest started config's, then follows Redis.
func (s *redisSource) Start(app *rulestore.App) {
	s.app.Store(app)
	s.start()
}

// Release drops app's hold: the last config's stops the source.
func (s *redisSource) Release(app *rulestore.App) error {
	s.app.CompareAndSwap(app, nil)
	_, err := sources.Delete(s.poolKey)
	return err
}

// Client is the shared Redis client.
func (s *redisSource) Client() redis.UniversalClient { return s.client }

// ClientState is App.ClientState.
func (s *redisSource) ClientState(key string, newValue func(redis.UniversalClient) any) any {
	if v, ok := s.clientStates.Load(key); ok {
		return v
	}
	v, _ := s.clientStates.LoadOrStore(key, newValue(s.client))
	return v
}

// LiveInstances is the number of live instances, from their heartbeats.
func (s *redisSource) LiveInstances() int { return int(s.instances.Load()) }

// Connection reports the connection and the pool.
func (s *redisSource) Connection() rulestore.Connection {
	c := rulestore.Connection{
		Connected: s.status.connected.Load(),
		Resyncs:   s.status.resyncs.Load(),
		Updates:   s.status.updates.Load(),
		Rejected:  s.status.rejected.Load(),
	}
	if ns := s.status.lastResync.Load(); ns != 0 {
		c.LastResync = time.Unix(0, ns)
	}
	ps := s.client.PoolStats()
	c.Pool = rulestore.PoolStatus{Open: ps.TotalConns, Idle: ps.IdleConns, PubSub: ps.PubSubStats.Active, Timeouts: ps.Timeouts}
	if pp := ps.PipelineStats; pp != nil { // go-redis pipelines on a pool of their own
		c.Pool.Open += pp.TotalConns
		c.Pool.Idle += pp.IdleConns
		c.Pool.Timeouts += pp.Timeouts
	}
	return c
}

// Rejected lists the rules whose last version was rejected here.
func (s *redisSource) Rejected() []rulestore.InvalidRule { return s.feedback.rejected() }

// RejectedRule is the rejection of one rule, or nil.
func (s *redisSource) RejectedRule(k rulestore.Kind, id string) *rulestore.RejectedView {
	fb := &s.feedback
	fb.mu.Lock()
	defer fb.mu.Unlock()
	r, ok := fb.invalid[rulestore.RuleRef{Kind: k, ID: id}]
	if !ok {
		return nil
	}
	return &rulestore.RejectedView{Version: r.Version, Fields: r.fields, Field: r.Field, Reason: r.Reason, Since: r.Since}
}

// Skipped lists the keys the last resync skipped.
func (s *redisSource) Skipped() []rulestore.InvalidRule { return s.feedback.skipped.list() }

// Exists reads whether rule id's hash exists in Redis.
func (s *redisSource) Exists(ctx context.Context, k rulestore.Kind, id string) (bool, error) {
	n, err := s.client.Exists(ctx, s.names.RuleKey(k, id)).Result()
	return n > 0, err
}

// History reads a rule's history, newest first.
func (s *redisSource) History(ctx context.Context, k rulestore.Kind, id string) ([]history.Entry, error) {
	return s.history(ctx, k, id)
}

// RecentChanges reads the change log's newest entries.
func (s *redisSource) RecentChanges(ctx context.Context) ([]rulestore.RecentChange, error) {
	return s.recentChanges(ctx)
}

// FleetDeclares reads the live instances' declarations once.
func (s *redisSource) FleetDeclares(ctx context.Context) (func(rulestore.Kind, string) []string, error) {
	f, err := s.readFleetDeclares(ctx)
	if err != nil {
		return nil, err
	}
	return f.lacking, nil
}

// Verdicts reads the stored fields of a rule and every instance's verdict
// on it, with its liveness, sorted by instance.
func (s *redisSource) Verdicts(ctx context.Context, k rulestore.Kind, id string) (rulestore.Fields, []rulestore.InstanceVerdict, error) {
	out := []rulestore.InstanceVerdict{}
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	stored, err := s.client.HGetAll(ctx, s.names.RuleKey(k, id)).Result()
	if err != nil && !isWrongType(err) {
		return nil, nil, err
	}
	var cur rulestore.Fields
	if len(stored) > 0 {
		cur = rulestore.Fields(stored)
	}
	raw, err := s.client.HGetAll(ctx, s.names.StatusKey(k, id)).Result()
	if err != nil {
		return nil, nil, err
	}
	members, err := s.members(ctx)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	var gone []string
	for who, js := range raw {
		var v rulestore.Verdict
		if json.Unmarshal([]byte(js), &v) != nil {
			continue
		}
		live, known := members[v.Heartbeat]
		if v.Heartbeat != "" && !known {
			gone = append(gone, who) // stopped more than stoppedShown ago
			continue
		}
		seen[v.Heartbeat] = true
		iv := rulestore.InstanceVerdict{Instance: who, Verdict: v, Live: live, InstanceState: "stopped"}
		switch {
		case v.Heartbeat == "":
			iv.InstanceState = "unknown"
		case iv.Live:
			iv.InstanceState = "live"
		}
		out = append(out, iv)
	}
	if len(gone) > 0 {
		// A row is written only by its own instance, which is gone: if the
		// prune fails, the next read prunes it.
		s.client.HDel(ctx, s.names.StatusKey(k, id), gone...)
	}
	for m, live := range members {
		if live && !seen[m] {
			out = append(out, rulestore.InstanceVerdict{Instance: "heartbeat " + m, Verdict: rulestore.Verdict{State: "none", Heartbeat: m},
				Live: true, InstanceState: "live"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Instance < out[j].Instance })
	return cur, out, nil
}
