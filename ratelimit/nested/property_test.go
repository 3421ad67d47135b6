package nested

import (
	"math"
	"math/rand"
	"testing"
)

// tree is a random tree of budgets of one kind, every leaf at the same
// depth (levels are rules: key → team → org).
type tree struct {
	nodes  []*tnode
	leaves []*tnode
	depth  int
}

type tnode struct {
	limit    *Limit
	g        float64
	state    State
	parent   *tnode
	children []*tnode
	height   int // levels above the leaves
	// shareBurst is what its children's guaranteed bursts are shares of.
	shareBurst float64
	// Spends through the node: running total, and for the overshoot
	// check the least of (total before a spend − rate × its time).
	total, least float64
}

// randomTree builds a tree of depth 2 or 3; each parent's children's
// guarantees add up to at most 100 % (some children have none). calendar:
// daily quotas; else token buckets.
func randomTree(rng *rand.Rand, calendar bool) *tree {
	tr := &tree{depth: 2 + rng.Intn(2)}
	var grow func(parent *tnode, height int) *tnode
	grow = func(parent *tnode, height int) *tnode {
		n := &tnode{parent: parent, height: height, least: math.Inf(1)}
		qps := 20 + rng.Float64()*180
		if parent != nil {
			qps = parent.limit.QPS * (0.3 + rng.Float64())
		}
		if calendar {
			n.limit = daily(math.Round(qps * 10))
			n.limit.QPS = qps // only to size the children
		} else {
			n.limit = bucket(qps, math.Round(2+rng.Float64()*qps/5))
		}
		tr.nodes = append(tr.nodes, n)
		if height == 0 {
			tr.leaves = append(tr.leaves, n)
			return n
		}
		k := 1 + rng.Intn(4)
		left := 1.0
		for i := 0; i < k; i++ {
			c := grow(n, height-1)
			if rng.Intn(4) > 0 {
				c.g = left * rng.Float64()
				if i == k-1 && rng.Intn(2) == 0 {
					c.g = left // exactly 100 % at times
				}
				left -= c.g
			}
			n.children = append(n.children, c)
		}
		return n
	}
	grow(nil, tr.depth-1)
	return tr
}

// protect picks a leaf and gives it and each of its ancestors below the
// root a guarantee (5 % where it had none, its siblings' scaled to 90 %),
// so its guarantee holds end to end.
func (tr *tree) protect(rng *rand.Rand) *tnode {
	leaf := tr.leaves[rng.Intn(len(tr.leaves))]
	for n := leaf; n.parent != nil; n = n.parent {
		if n.g == 0 {
			n.g = 0.05
			for _, s := range n.parent.children {
				if s != n {
					s.g *= 0.9
				}
			}
		}
	}
	return leaf
}

// other is a random leaf other than prot, or nil if there is none.
func (tr *tree) other(rng *rand.Rand, prot *tnode) *tnode {
	if len(tr.leaves) == 1 {
		return nil
	}
	for {
		if l := tr.leaves[rng.Intn(len(tr.leaves))]; l != prot {
			return l
		}
	}
}

// sizeShares sets each node's shareBurst, from the path up from it.
func (tr *tree) sizeShares() {
	for _, n := range tr.nodes {
		var share [MaxDepth]Limit
		var backed [MaxDepth]bool
		shares(tr.path(n), &share, &backed)
		n.shareBurst = share[0].Burst
	}
}

func (tr *tree) path(leaf *tnode) []Node {
	var p []Node
	for n := leaf; n != nil; n = n.parent {
		p = append(p, Node{Limit: n.limit, Guarantee: n.g, State: &n.state})
	}
	return p
}

func snapshot(p []Node) (s [MaxDepth]State) {
	for i := range p {
		s[i] = *p[i].State
	}
	return s
}

// Token buckets, many seeds: a refusal changes nothing; a leaf spending
// within its end-to-end guarantee is never refused above itself; the
// spends through every parent over any interval stay within rate × time
// + burst + height × its children's guaranteed bursts, and its debt
// within height × those bursts.
func TestPropertyRateBounds(t *testing.T) {
	seededTrees(t, false, func(seed int64, rng *rand.Rand, tr *tree, prot *tnode, share *Limit) {
		// The protected leaf spends what its guarantee refills, at exactly
		// that pace.
		grate, gburst := prot.g*share.QPS, prot.g*share.Burst
		pn := min(1, gburst)
		prot.limit.QPS, prot.limit.Burst = max(prot.limit.QPS, grate), max(prot.limit.Burst, pn)
		every := int64(math.Ceil(pn / grate * float64(sec)))
		now, protNext := t0, t0
		for step := 0; step < 3000; step++ {
			leaf, n := tr.other(rng, prot), float64(1+rng.Intn(2))
			if r := now + int64(rng.ExpFloat64()*float64(sec)/400); leaf == nil || protNext <= r {
				leaf, n, now = prot, pn, protNext
				protNext += every
			} else {
				now = r
			}
			path := tr.path(leaf)
			before := snapshot(path)
			var out Outcome
			if !Spend(path, n, now, &out) {
				if snapshot(path) != before {
					t.Fatalf("seed %d: a refusal changed state", seed)
				}
				if leaf == prot && out.Refused > 0 {
					t.Fatalf("seed %d step %d: the protected leaf refused at level %d: %+v", seed, step, out.Refused, out.Levels[:out.Depth])
				}
				continue
			}
			for a, i := leaf.parent, 1; a != nil; a, i = a.parent, i+1 {
				a.least = min(a.least, a.total-a.limit.QPS*float64(now)/float64(sec))
				a.total += n
				over := a.total - a.limit.QPS*float64(now)/float64(sec) - a.least
				var gb float64
				for _, c := range a.children {
					gb += c.g * a.shareBurst
				}
				if bound := a.limit.Burst + float64(a.height)*gb; over > bound+1e-6 {
					t.Fatalf("seed %d: level %d passed %v over rate × time, bound %v", seed, i, over, bound)
				}
				if debt := -a.state.Level; debt > float64(a.height)*gb+1e-6 {
					t.Fatalf("seed %d: level %d in debt %v, bound %v", seed, i, debt, float64(a.height)*gb)
				}
			}
		}
	})
}

// Calendar quotas, many seeds: no node ever uses more than its quota, nor
// with its children's reserves; a refusal changes nothing; a leaf that
// spends first in the window and within its end-to-end guarantee is never
// refused; every parent's use is the sum of what passed through it.
func TestPropertyCalendarBounds(t *testing.T) {
	seededTrees(t, true, func(seed int64, rng *rand.Rand, tr *tree, prot *tnode, share *Limit) {
		guaranteed := math.Floor(min(prot.g*share.Quota, prot.limit.Quota))
		now := t0
		for step := 0; step < 3000; step++ {
			now += int64(rng.ExpFloat64() * float64(sec))
			leaf, n := tr.other(rng, prot), float64(1+rng.Intn(3))
			// The protected leaf spends first, then at random, all of its
			// guarantee within the first 2000 steps (a day does not end).
			if leaf == nil || step == 0 || (guaranteed > 0 && rng.Intn(20) == 0) {
				leaf, n = prot, min(1, guaranteed)
			}
			if leaf == prot && n > 0 {
				guaranteed -= n
			}
			path := tr.path(leaf)
			before := snapshot(path)
			var out Outcome
			if !Spend(path, n, now, &out) {
				if snapshot(path) != before {
					t.Fatalf("seed %d: a refusal changed state", seed)
				}
				if leaf == prot {
					t.Fatalf("seed %d step %d: the protected leaf refused at level %d: %+v", seed, step, out.Refused, out.Levels[:out.Depth])
				}
				continue
			}
			for a := leaf; a != nil; a = a.parent {
				a.total += n
				if s := a.state; s.Level+s.Reserved > a.limit.Quota+1e-9 || s.Level != a.total {
					t.Fatalf("seed %d: a node used %v and reserved %v of %v; %v passed through it", seed, s.Level, s.Reserved, a.limit.Quota, a.total)
				}
			}
		}
	})
}

// seededTrees runs check on the random tree of each of 300 seeds (30
// with -short), with its protected leaf and what that leaf's guarantee
// is a share of.
func seededTrees(t *testing.T, calendar bool, check func(seed int64, rng *rand.Rand, tr *tree, prot *tnode, share *Limit)) {
	t.Helper()
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		tr := randomTree(rng, calendar)
		prot := tr.protect(rng)
		tr.sizeShares()
		var share [MaxDepth]Limit
		var backed [MaxDepth]bool
		shares(tr.path(prot), &share, &backed)
		check(seed, rng, tr, prot, &share[1])
	}
}
