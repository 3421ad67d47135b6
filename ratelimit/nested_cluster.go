package ratelimit

import (
	"context"
	"net/http"

	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/ratelimit/nested"
)

// spendCluster decides a spend along a tree of scope cluster in Redis:
// one script over the path's hashes, named under the root key so a
// Redis Cluster keeps the tree in one slot (cluster.SpendNested). When
// Redis fails, failed is set and d is the leaf rule's on_redis_error
// decision for the leaf's key alone (its fallback share, allow or deny).
func spendCluster(t *taken, kb []byte, path []nested.Node, now, wall int64) (ok bool, d Decision, failed bool) {
	nw, rule := t.nest, t.m.rule
	ce := t.eng.(*clusterEngine)
	prefix := ""
	if ref := t.m.lim.Backend(); ref != nil {
		prefix = ref.B.KeyPrefix()
	}
	root := nw.n - 1
	rootKey := kb[nw.from[root]:nw.to[root]]
	var keys [nested.MaxDepth]string
	for i := range nw.n {
		keys[i] = cluster.NestedRedisKey(prefix, nw.rules[root].ID, rootKey, nw.rules[i].ID, kb[nw.from[i]:nw.to[i]])
	}
	ok, err := ce.SpendNested(&rule.Rule, keys[:nw.n], path, float64(t.cost), wall, &nw.out)
	if err == nil {
		return ok, Decision{}, false
	}
	d = Decision{Limits: &rule.Limits}
	ce.Fail(&rule.Rule, t.key(kb), now, t.cost, &d)
	return false, d, true
}

// clusterUsage reads the use of a tree of scope cluster at every level of
// path (keys, leaf first) from Redis, by the script with a spend of 0,
// which changes nothing; tracked tells which nodes Redis holds. lim is
// the leaf rule's limiter, nil before a handler used it.
func clusterUsage(ctx context.Context, lim *limiter, chain []*Rule, keys []string, path []nested.Node, out *nested.Outcome, tracked []bool) error {
	var ref *cluster.BackendRef
	if lim != nil {
		ref = lim.Backend()
	}
	if ref == nil || ref.B.Client() == nil {
		return quotaError(http.StatusServiceUnavailable, "rule %q is scope cluster and no handler on this instance has its redis yet", chain[0].ID)
	}
	c, root := ref.B.Client(), len(chain)-1
	rkeys := make([]string, len(chain))
	for i, r := range chain {
		rkeys[i] = cluster.NestedRedisKey(ref.B.KeyPrefix(), chain[root].ID, []byte(keys[root]), r.ID, []byte(keys[i]))
	}
	if _, err := cluster.NestedSpend(ctx, c, rkeys, path, 0, 0, out); err != nil {
		return quotaError(http.StatusServiceUnavailable, "redis: %v", err)
	}
	for i, k := range rkeys {
		n, err := c.Exists(ctx, k).Result()
		if err != nil {
			return quotaError(http.StatusServiceUnavailable, "redis: %v", err)
		}
		tracked[i] = n == 1
	}
	return nil
}
