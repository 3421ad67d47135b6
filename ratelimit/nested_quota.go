package ratelimit

import (
	"context"
	"math"
	"net/http"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/nested"
	"github.com/sluicegw/sluice/rulestore"
)

func init() { rulestore.RegisterView("quota_tree", serveQuotaTree) }

// QuotaTree is the answer of GET /sluice/quota_tree/{rule}/{key} (or
// ?request values, as /sluice/quota takes them): a key's use at every
// level of its tree of nested quotas, leaf first (docs/ratelimit-quotas.md,
// "Use per level").
type QuotaTree struct {
	Rule   string       `json:"rule"`
	Levels []QuotaLevel `json:"levels"`
}

// QuotaLevel is one node's use: its rule and key, its ceiling, and its
// guarantee at its parent.
type QuotaLevel struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
	// Ceiling is the node's own burst (token bucket) or quota (calendar).
	Ceiling float64 `json:"ceiling"`
	// Used is what is spent of Ceiling now (over it: a bucket in debt for
	// its children's guarantees).
	Used float64 `json:"used"`
	// Remaining is what a spend no guarantee covers could take here.
	Remaining float64 `json:"remaining"`
	// GuaranteePercent is the node's guarantee at its parent (0 at the
	// root, or borrowing only); GuaranteeLeft what of it is unspent now,
	// GuaranteedUsed (calendar parent) what the node spent within it in
	// the parent's window. What the node spent beyond its guarantee was
	// borrowed.
	GuaranteePercent float64 `json:"guarantee_percent"`
	GuaranteeLeft    float64 `json:"guarantee_left"`
	GuaranteedUsed   float64 `json:"guaranteed_used"`
	// Tracked: this instance holds state for the node (false: it is
	// fresh, its whole ceiling and guarantee available).
	Tracked bool `json:"tracked"`
}

func serveQuotaTree(ctx context.Context, app *rulestore.App, rest string) (any, error) {
	q, err := parseQuotaPath(rest) // quota_key.go
	if err != nil {
		return nil, err
	}
	find := storeRules(app)
	rule := find(q.id)
	if rule == nil {
		return nil, quotaError(http.StatusNotFound, "no rate_limit rule %q on this instance%s", q.id, rulestore.DidYouMean(q.id, quotaRuleIDs(app)...))
	}
	chain, err := chainOf(nil, rule, find)
	if err != nil {
		return nil, quotaError(http.StatusBadRequest, "%v", err)
	}
	req := q.values.Request().WithContext(ctx)
	key := handlerkit.FitKey(q.key)
	if q.key == "" {
		var ok bool
		if key, ok = rule.Key.Resolve(q.values); !ok {
			return nil, quotaError(http.StatusBadRequest, "rule %q keys requests by %q: these request values resolve to no key", rule.ID, rule.Key.String())
		}
	}
	keys, err := treeKeys(req, app, chain, key, q.key != "")
	if err != nil {
		return nil, err
	}
	return quotaTreeOf(ctx, chain, keys)
}

// treeKeys finds the key at every level of chain above key: by each
// level's parent_key, read from the request values, or from its parent
// hash in Redis.
func treeKeys(req *http.Request, app *rulestore.App, chain []*Rule, key string, stored bool) ([]string, error) {
	keys := []string{key}
	now := engine.Now()
	for _, child := range chain[:len(chain)-1] {
		if child.Nest.HasParentKey && stored {
			return nil, quotaError(http.StatusBadRequest, "rule %q finds its parent's key by parent_key %q: give request values (?header.<name>=...) instead of a stored key",
				child.ID, child.Nest.ParentKey.String())
		}
		var cache parentCache // a view reads Redis afresh
		kb, ok := cache.parentKey(nil, req, app, child, []byte(keys[len(keys)-1]), now)
		if !ok {
			return nil, quotaError(http.StatusNotFound, "rule %q: no parent key for %q", child.ID, keys[len(keys)-1])
		}
		keys = append(keys, string(kb))
	}
	return keys, nil
}

// quotaTreeOf reads the nodes of keys in chain without changing them,
// under the root key's lock (in Redis, for a tree of scope cluster), and
// what each level's use is now.
func quotaTreeOf(ctx context.Context, chain []*Rule, keys []string) (*QuotaTree, error) {
	n := len(chain)
	var states [nested.MaxDepth]nested.State
	var tracked [nested.MaxDepth]bool
	lims := make([]*limiter, n)
	for i, r := range chain {
		lims[i], _ = limiters.Load(r.ID)
	}
	if root := lims[n-1]; root != nil {
		mu := root.nodes.path([]byte(keys[n-1]))
		mu.Lock()
		for i := range chain {
			if lims[i] != nil {
				states[i], tracked[i] = lims[i].nodes.peek(keys[i])
			}
		}
		mu.Unlock()
	}
	var path [nested.MaxDepth]nested.Node
	for i, r := range chain {
		path[i] = nested.Node{Limit: &r.Nest.limit, Guarantee: r.Nest.Guarantee, State: &states[i]}
	}
	var out nested.Outcome
	if chain[0].Cluster() {
		if err := clusterUsage(ctx, lims[0], chain, keys, path[:n], &out, tracked[:n]); err != nil {
			return nil, err
		}
	} else {
		nested.Usage(path[:n], engine.Wall(engine.Now()), &out)
	}
	t := &QuotaTree{Rule: chain[0].ID, Levels: make([]QuotaLevel, n)}
	for i, r := range chain {
		lv := &out.Levels[i]
		t.Levels[i] = QuotaLevel{Rule: r.ID, Key: keys[i], Ceiling: lv.Ceiling, Used: round3(lv.Used), Remaining: round3(lv.Remaining),
			GuaranteeLeft: round3(lv.GuaranteeLeft), GuaranteedUsed: round3(lv.GuaranteedUsed), Tracked: tracked[i]}
		if i+1 < n {
			t.Levels[i].GuaranteePercent = r.Nest.Guarantee * 100
		}
	}
	return t, nil
}

// peek is key's node state, if the table holds one; the caller holds the
// tree's path lock.
func (t *nodeTable) peek(key string) (nested.State, bool) {
	t.mu.Lock()
	e := t.m[key]
	t.mu.Unlock()
	if e == nil {
		return nested.State{}, false
	}
	return e.s, true
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
