package ratelimit

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/nested"
)

// nestWalk is one request's path through a nested rule's tree: each
// level's rule, limiter and key (kb[from[i]:to[i]]), leaf first.
type nestWalk struct {
	n        int
	rules    [nested.MaxDepth]*Rule
	lims     [nested.MaxDepth]*limiter
	from, to [nested.MaxDepth]int32
	out      nested.Outcome
}

// nestKeys is the keys step of a rule with a parent: the tree's rules in
// force, and the key at every level above the leaf, appended to kb. A
// tree with no path (a parent missing, a cycle) fails the request (500,
// logged); guarantees over 100 % are logged and the request decided:
// the guarantees are then first come, first served, and the parent's
// bounds still hold. A level without a key is answered as an empty key.
func (p *pass) nestKeys(w http.ResponseWriter, r *http.Request, t *taken, kb []byte) (_ []byte, answered bool, err error) {
	app := p.h.app
	nw := &nestWalk{}
	var chain [nested.MaxDepth]*Rule
	rules, err := chainOf(chain[:0], t.m.rule, storeRules(app))
	if err != nil {
		return kb, true, caddyhttp.Error(http.StatusInternalServerError, err)
	}
	p.h.treeChecked(t.m.lim, rules)
	now := t.m.lim.now()
	nw.n = len(rules)
	nw.rules[0], nw.lims[0], nw.from[0], nw.to[0] = t.m.rule, t.m.lim, int32(t.kfrom), int32(t.kto)
	for i := 1; i < nw.n; i++ {
		child, lim := nw.rules[i-1], nw.lims[i-1]
		from := len(kb)
		var ok bool
		if kb, ok = lim.nodes.parents.parentKey(kb, r, app, child, kb[nw.from[i-1]:nw.to[i-1]], now); !ok {
			p.ph.rule = child
			return kb, true, p.h.denyEmptyKey(w, child, lim, p)
		}
		nw.rules[i], nw.lims[i] = rules[i], p.h.holder.Get(rules[i].ID)
		nw.from[i], nw.to[i] = int32(from), int32(len(kb))
	}
	t.nest = nw
	return kb, false, nil
}

// takeNested decides a rule with a parent: a spend of the request's cost
// at every level of its path, all or none (nested.Spend), under the lock
// of its root key. The decision reads as the leaf's: its remaining, and,
// refused, the refusing level's wait.
func takeNested(t *taken, kb []byte) Decision {
	nw, rule := t.nest, t.m.rule
	now := t.m.lim.now()
	wall := engine.Wall(now)
	var path [nested.MaxDepth]nested.Node
	for i := range nw.n {
		path[i] = nested.Node{Limit: &nw.rules[i].Nest.limit, Guarantee: nw.rules[i].Nest.Guarantee}
	}
	var ok bool
	if rule.Cluster() {
		var failed bool
		var d Decision
		if ok, d, failed = spendCluster(t, kb, path[:nw.n], now, wall); failed {
			return d
		}
	} else {
		ok = spendLocal(nw, kb, path[:nw.n], float64(t.cost), now, wall)
	}
	d := Decision{Limits: &rule.Limits}
	leaf := &nw.out.Levels[0]
	d.Remaining = int64(treeRemaining(&nw.out))
	if rule.Calendar != nil {
		d.Cal = rule.Calendar.Window(wall)
		d.Reset = d.Cal.End - wall
	} else {
		d.Reset = engine.CeilNanos(max(leaf.Ceiling-leaf.Remaining, 0) / rule.Limits.QPS)
	}
	if !ok {
		d.Reason, d.RetryAfter = RateLimited, nw.out.Wait
	}
	return d
}

// spendLocal decides a spend of n along path on the nodes this process
// keeps, under the lock of its root key.
func spendLocal(nw *nestWalk, kb []byte, path []nested.Node, n float64, now, wall int64) bool {
	for i := range nw.n {
		var parent *Rule
		if i+1 < nw.n {
			parent = nw.rules[i+1]
		}
		key := kb[nw.from[i]:nw.to[i]:nw.to[i]]
		path[i].State = nw.lims[i].nodes.node(key, now, nodeIdle(nw.rules[i], parent))
	}
	root := nw.n - 1
	mu := nw.lims[root].nodes.path(kb[nw.from[root]:nw.to[root]])
	mu.Lock()
	defer mu.Unlock()
	return nested.Spend(path, n, wall, &nw.out)
}

// treeRemaining is a hint of what the leaf could spend next: its own
// ceiling's remaining, capped at each level above by what that level
// lends it, its unused pool or the child's guarantee left, whichever is
// more.
func treeRemaining(out *nested.Outcome) float64 {
	left := out.Levels[0].Remaining
	for i := 1; i < out.Depth; i++ {
		left = min(left, max(out.Levels[i].Remaining, out.Levels[i-1].GuaranteeLeft))
	}
	return max(left, 0)
}
