package grayroute

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/rulestore"
)

// The fleet's counts of an analysis interval: each instance adds its own to
// a Redis hash, then reads the totals.

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
