package ratelimit

import (
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
