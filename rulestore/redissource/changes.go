package redissource

import (
	"context"
	"encoding/json"
	"github.com/sluicegw/sluice/rulestore"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/rulestore/history"
)

func (s *redisSource) recentChanges(ctx context.Context) ([]rulestore.RecentChange, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	entries, err := s.client.XRevRangeN(ctx, s.names.Stream(), "+", "-", rulestore.ChangesShown).Result()
	if err != nil && err != redis.Nil {
		return nil, err
	}
	out := make([]rulestore.RecentChange, 0, len(entries))
	histories := map[rulestore.RuleRef]*redis.StringSliceCmd{}
	pipe := s.client.Pipeline()
	for _, e := range entries {
		typ, _ := e.Values["type"].(string)
		id, _ := e.Values["id"].(string)
		k, ok := rulestore.ParseKind(typ)
		if !ok || rulestore.ValidID(id) != nil {
			continue
		}
		c := rulestore.RecentChange{Kind: typ, ID: id, Diff: []rulestore.FieldChange{}}
		c.Op, _ = e.Values["op"].(string)
		c.Version, _ = e.Values["version"].(string)
		if ns, err := strconv.ParseInt(strFrom(e.Values["published_at"]), 10, 64); err == nil {
			c.At = time.Unix(0, ns).UTC()
		}
		out = append(out, c)
		if ref := (rulestore.RuleRef{Kind: k, ID: id}); histories[ref] == nil {
			histories[ref] = pipe.LRange(ctx, s.names.HistoryKey(k, id), 0, history.Length-1)
		}
	}
	if len(histories) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, err
		}
	}
	for i := range out {
		k, _ := rulestore.ParseKind(out[i].Kind)
		for _, raw := range histories[rulestore.RuleRef{Kind: k, ID: out[i].ID}].Val() {
			var e history.Entry
			if json.Unmarshal([]byte(raw), &e) == nil && e.Op == out[i].Op && e.Version == out[i].Version {
				out[i].Via, out[i].Instance, out[i].Diff = e.Via, e.Instance, rulestore.DiffFields(e.Prev, e.Fields)
				break
			}
		}
	}
	return out, nil
}

func strFrom(v any) string { s, _ := v.(string); return s }
