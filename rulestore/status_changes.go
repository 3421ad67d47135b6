package rulestore

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/rulestore/history"
)

// The status page's fleet-wide feed of recent rule changes: the newest
// entries of the change log (every write through Sluice, from any
// instance), each joined with its rule's history entry for who made it and
// what it changed. Without Redis, the in-memory history of this instance.

// changesShown bounds the feed.
const changesShown = 50

// RecentChange is one rule change in the feed.
type RecentChange struct {
	// Kind is the rule's kind: rate_limit, circuit_breaker, gray, binding or
	// one another module registers.
	Kind string `json:"kind"`
	// ID is the rule's id (a route name for a binding).
	ID string `json:"id"`
	// Op is upsert, delete or rollback.
	Op string `json:"op"`
	// Version is the rule's version after the change ("" once deleted).
	Version string `json:"version,omitempty"`
	// At is when the change was made.
	At time.Time `json:"at"`
	// Via says how the change was made (see history.Entry), when the rule's
	// history still holds the entry.
	Via string `json:"via,omitempty"`
	// Instance is the instance that made it (see history.Entry), likewise.
	Instance string `json:"instance,omitempty"`
	// Diff lists the fields the change set, changed or unset.
	Diff []FieldChange `json:"diff"`
}

func changeFromHistory(e history.Entry) RecentChange {
	return RecentChange{Kind: e.Kind, ID: e.ID, Op: e.Op, Version: e.Version, At: e.At, Via: e.Via,
		Instance: e.Instance, Diff: DiffFields(e.Prev, e.Fields)}
}

// RecentChanges returns the newest rule changes, newest first.
func (a *App) RecentChanges(ctx context.Context) ([]RecentChange, error) {
	if a.source == nil {
		return []RecentChange{}, nil
	}
	return a.source.RecentChanges(ctx)
}

// RecentChanges are the newest changes written through the admin API.
func (m *memoryLayer) RecentChanges(context.Context) ([]RecentChange, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []RecentChange{}
	for _, h := range m.history {
		for _, e := range h {
			out = append(out, changeFromHistory(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out[:min(len(out), changesShown)], nil
}

func (s *redisSource) recentChanges(ctx context.Context) ([]RecentChange, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	entries, err := s.client.XRevRangeN(ctx, s.names.Stream(), "+", "-", changesShown).Result()
	if err != nil && err != redis.Nil {
		return nil, err
	}
	out := make([]RecentChange, 0, len(entries))
	histories := map[RuleRef]*redis.StringSliceCmd{}
	pipe := s.client.Pipeline()
	for _, e := range entries {
		typ, _ := e.Values["type"].(string)
		id, _ := e.Values["id"].(string)
		k, ok := ParseKind(typ)
		if !ok || ValidID(id) != nil {
			continue
		}
		c := RecentChange{Kind: typ, ID: id, Diff: []FieldChange{}}
		c.Op, _ = e.Values["op"].(string)
		c.Version, _ = e.Values["version"].(string)
		if ns, err := strconv.ParseInt(strFrom(e.Values["published_at"]), 10, 64); err == nil {
			c.At = time.Unix(0, ns).UTC()
		}
		out = append(out, c)
		if ref := (RuleRef{k, id}); histories[ref] == nil {
			histories[ref] = pipe.LRange(ctx, s.names.HistoryKey(k, id), 0, history.Length-1)
		}
	}
	if len(histories) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, err
		}
	}
	for i := range out {
		k, _ := ParseKind(out[i].Kind)
		for _, raw := range histories[RuleRef{k, out[i].ID}].Val() {
			var e history.Entry
			if json.Unmarshal([]byte(raw), &e) == nil && e.Op == out[i].Op && e.Version == out[i].Version {
				out[i].Via, out[i].Instance, out[i].Diff = e.Via, e.Instance, DiffFields(e.Prev, e.Fields)
				break
			}
		}
	}
	return out, nil
}

func strFrom(v any) string { s, _ := v.(string); return s }
