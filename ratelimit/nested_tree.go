package ratelimit

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sluicegw/sluice/ratelimit/nested"
	"github.com/sluicegw/sluice/rulestore"
	"go.uber.org/zap"
)

// ruleLookup finds a rate_limit rule by id (nil when there is none).
type ruleLookup func(id string) *Rule

// storeRules looks rules up in the rule store, as a request finds them.
func storeRules(app *rulestore.App) ruleLookup {
	return func(id string) *Rule {
		if rr := app.Lookup(rulestore.RateLimit, id); rr != nil {
			if r, ok := rr.Value.(*Rule); ok {
				return r
			}
		}
		return nil
	}
}

// chainOf appends leaf and its ancestors, leaf first, to chain: the levels
// of every path through leaf. It fails on a parent that does not exist, a
// cycle, a chain over nested.MaxDepth levels, or a level that cannot nest,
// naming the rule and its field.
func chainOf(chain []*Rule, leaf *Rule, find ruleLookup) ([]*Rule, error) {
	chain = append(chain, leaf)
	for r := leaf; r.Nest.Parent != ""; {
		p := find(r.Nest.Parent)
		switch {
		case p == nil:
			return chain, fmt.Errorf("rate_limit rule %q: field parent: no rate_limit rule %q", r.ID, r.Nest.Parent)
		case inChain(chain, p.ID):
			return chain, fmt.Errorf("rate_limit rule %q: field parent: %s makes a cycle", r.ID, cycleText(chain, p.ID))
		case len(chain) == nested.MaxDepth:
			return chain, fmt.Errorf("rate_limit rule %q: field parent: a tree has at most %d levels", leaf.ID, nested.MaxDepth)
		}
		if why := p.nestableWhy(); why != "" {
			return chain, fmt.Errorf("rate_limit rule %q, the parent of %q: %s", p.ID, r.ID, why)
		}
		if p.Scope != leaf.Scope {
			return chain, fmt.Errorf("rate_limit rule %q, the parent of %q: field scope: %s, and every level of a tree has its leaf's scope, %s",
				p.ID, r.ID, p.Scope, leaf.Scope)
		}
		chain = append(chain, p)
		r = p
	}
	return chain, nil
}

func inChain(chain []*Rule, id string) bool {
	for _, r := range chain {
		if r.ID == id {
			return true
		}
	}
	return false
}

// cycleText is the cycle chain closes at id: "a → b → a".
func cycleText(chain []*Rule, id string) string {
	var ids []string
	for i := len(chain) - 1; i >= 0; i-- {
		ids = append([]string{chain[i].ID}, ids...)
		if chain[i].ID == id {
			break
		}
	}
	return strings.Join(append(ids, id), " → ")
}

// checkShares checks the guarantees of parent's children among rules: at
// most 100 % together (nested.ValidateShares), each named with its field.
func checkShares(parent string, rules map[string]*Rule) error {
	ids := make([]string, 0, len(rules))
	for id, r := range rules {
		if r.Nest.Parent == parent {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	shares := make([]nested.Share, len(ids))
	for i, id := range ids {
		shares[i] = nested.Share{Child: "rate_limit rule " + id, Field: "guarantee", Percent: rules[id].Nest.Guarantee * 100}
	}
	return nested.ValidateShares(parent, shares)
}

// checkTrees checks every tree among rules: each chain, and each parent's
// children's guarantees.
func checkTrees(rules map[string]*Rule) error {
	find := func(id string) *Rule { return rules[id] }
	ids := make([]string, 0, len(rules))
	for id := range rules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var chain []*Rule
	for _, id := range ids {
		r := rules[id]
		if r.Nest.Parent == "" {
			continue
		}
		var err error
		if chain, err = chainOf(chain[:0], r, find); err != nil {
			return err
		}
		if err := checkShares(r.Nest.Parent, rules); err != nil {
			return err
		}
	}
	return nil
}

// storeTrees checks the trees of the rules in force in app.
func storeTrees(app *rulestore.App) error { return checkTrees(rulesIn(app)) }

// rulesIn are the rate_limit rules in force in app, by id.
func rulesIn(app *rulestore.App) map[string]*Rule {
	rules := map[string]*Rule{}
	for id, rr := range app.Rules(rulestore.RateLimit) {
		if r, ok := rr.Value.(*Rule); ok {
			rules[id] = r
		}
	}
	return rules
}

// treeCheck is a leaf rule's tree as last checked: its chain's rules and
// the verdict on their guarantees, reused for parentTTL while the chain
// is the same (a sibling's change applies within it).
type treeCheck struct {
	rules [nested.MaxDepth]*Rule
	n     int
	at    int64
	err   error
}

// treeChecked checks the guarantees at every parent of chain (the rules
// of lim's leaf and its ancestors) against the rules in force, at most
// once per parentTTL for the same chain, and logs guarantees over 100 %
// when the verdict changes (a rule written to Redis past the admin API's
// checks).
func (h *Handler) treeChecked(lim *limiter, chain []*Rule) error {
	now := lim.now()
	prev := lim.nodes.checked.Load()
	if prev != nil && now-prev.at < int64(parentTTL) && slices.Equal(prev.rules[:prev.n], chain) {
		return prev.err
	}
	c := &treeCheck{n: len(chain), at: now}
	copy(c.rules[:], chain)
	rules := rulesIn(h.app)
	for _, p := range chain[1:] {
		if c.err = checkShares(p.ID, rules); c.err != nil {
			break
		}
	}
	lim.nodes.checked.Store(c)
	if c.err != nil && (prev == nil || prev.err == nil || prev.err.Error() != c.err.Error()) {
		h.logger.Error("nested quota: guarantees over 100 %; they are first come, first served until fixed, within the parent's bounds",
			zap.String("rule", chain[0].ID), zap.Error(c.err))
	}
	return c.err
}

// checkNested fails a config without Redis whose trees do not hold: a
// parent missing, a cycle, guarantees over 100 %, or a rule with a parent
// and no parent_key (the parent hash lives in Redis). With Redis the
// rules may still change: a request finds its tree's faults instead.
func (h *Handler) checkNested() error {
	if h.app.HasRedis() {
		return nil
	}
	rules := rulesIn(h.app)
	ids := make([]string, 0, len(rules))
	for id, r := range rules {
		if r.Nest.Parent != "" && !r.Nest.HasParentKey {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		return fmt.Errorf("rate_limit rule %q: field parent_key: required without redis (the parent hash %s lives in Redis)",
			ids[0], ParentHash(h.app.KeyPrefix(), ids[0]))
	}
	return checkTrees(rules)
}
