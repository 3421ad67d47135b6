package nested

import (
	"testing"
)

// orgOfTwo is an organisation of 100/s (burst 10) with teams A and B,
// each guaranteed 50 % (50/s, a guaranteed burst of 5) and each capped at
// 80/s (burst 8).
type orgOfTwo struct {
	org, a, b State
	orgL      *Limit
	teamL     *Limit
}

func newOrgOfTwo() *orgOfTwo {
	return &orgOfTwo{orgL: bucket(100, 10), teamL: bucket(80, 8)}
}

func (o *orgOfTwo) pathA() []Node {
	return []Node{{Limit: o.teamL, Guarantee: 0.5, State: &o.a}, {Limit: o.orgL, State: &o.org}}
}

func (o *orgOfTwo) pathB() []Node {
	return []Node{{Limit: o.teamL, Guarantee: 0.5, State: &o.b}, {Limit: o.orgL, State: &o.org}}
}

// rateBound is what a bucket parent may pass in d ns: its rate over d,
// its burst, and its children's guaranteed bursts (the design note).
func rateBound(l *Limit, d int64, guarantees ...float64) float64 {
	b := l.QPS*float64(d)/float64(sec) + l.Burst
	for _, g := range guarantees {
		b += g * l.Burst
	}
	return b
}

// B idle: A borrows what B leaves, up to its own ceiling.
func TestRateIdleSiblingLendsUpToCeiling(t *testing.T) {
	o := newOrgOfTwo()
	a := &stream{path: o.pathA(), every: at(300), n: 1}
	run(t, t0+10*sec, a)
	t.Logf("10 s: A alone admitted %v (guaranteed %v, borrowed %v)", a.admitted, a.guaranteed, a.borrowed)
	ceiling := 80*10 + 8.0
	if a.admitted < 0.95*ceiling || a.admitted > ceiling {
		t.Fatalf("A alone admitted %v in 10 s, want its ceiling: %v (≥ 95 %%)", a.admitted, ceiling)
	}
	if a.refusedAt[1] != 0 {
		t.Fatalf("A refused %d times by the org, which had room (only its own ceiling refuses)", a.refusedAt[1])
	}
	if a.borrowed < 0.95*(80-50)*10 {
		t.Fatalf("A borrowed %v, want its ceiling beyond its guarantee, ≈ 300", a.borrowed)
	}
}

// The goal: A demands 300/s, B 40/s under its guarantee of 50/s.
// B gets all it asks for; A gets the rest of the org's 100/s.
func TestRateBusySiblingKeepsItsGuarantee(t *testing.T) {
	o := newOrgOfTwo()
	a := &stream{path: o.pathA(), every: at(300), n: 1}
	b := &stream{path: o.pathB(), every: at(40), n: 1}
	run(t, t0+10*sec, a, b)
	t.Logf("10 s: A admitted %v (guaranteed %v, borrowed %v), B %v", a.admitted, a.guaranteed, a.borrowed, b.admitted)
	if b.admitted != 400 || b.borrowed != 0 {
		t.Fatalf("B (40/s, guaranteed 50/s) admitted %v of 400, borrowed %v: want all, none borrowed", b.admitted, b.borrowed)
	}
	total := a.admitted + b.admitted
	if bound := rateBound(o.orgL, 10*sec, 0.5, 0.5); total > bound {
		t.Fatalf("org passed %v in 10 s, over its bound %v", total, bound)
	}
	// A takes what is left: 100/s − 40/s over 10 s, within the org's
	// burst (what it held at the start or owes at the end).
	if a.admitted < 600-o.orgL.Burst {
		t.Fatalf("A admitted %v, want the org's rest ≈ 600", a.admitted)
	}
}

// Both teams demand 300/s: each gets its guarantee. Each admits at least
// its guarantee's refill over the run (50/s × 10 s); together they admit
// at most the org's bound (1000 + burst 10 + guaranteed bursts 10), so
// each gets 500 to 520: the tolerance is the org's burst and the
// guaranteed bursts, 2 % of 10 s.
func TestRateBothBusyEachGetsItsGuarantee(t *testing.T) {
	o := newOrgOfTwo()
	a := &stream{path: o.pathA(), every: at(300), n: 1}
	b := &stream{path: o.pathB(), every: at(300), n: 1}
	run(t, t0+10*sec, a, b)
	t.Logf("10 s: A admitted %v, B %v", a.admitted, b.admitted)
	for name, s := range map[string]*stream{"A": a, "B": b} {
		if s.admitted < 500 || s.admitted > 520 {
			t.Errorf("%s admitted %v in 10 s, want its guarantee 500 (to 520)", name, s.admitted)
		}
	}
	if total, bound := a.admitted+b.admitted, rateBound(o.orgL, 10*sec, 0.5, 0.5); total > bound {
		t.Fatalf("org passed %v, over its bound %v", total, bound)
	}
}

// A member under its guarantee is never refused because a sibling drained
// the pool, even when the sibling asks first at every instant.
func TestRateGuaranteeHoldsWhenPoolDrained(t *testing.T) {
	o := newOrgOfTwo()
	a := &stream{path: o.pathA(), every: at(1000), n: 1}
	b := &stream{path: o.pathB(), every: at(49), n: 1, next: t0 + 1}
	run(t, t0+20*sec, a, b)
	if b.refusedAt != [MaxDepth]int{} {
		t.Fatalf("B under its guarantee refused: %v", b.refusedAt)
	}
	var out Outcome
	Usage(o.pathA(), t0+20*sec, &out)
	if out.Levels[1].Used <= 0 {
		t.Fatalf("the org was never drained (used %v): the test proves nothing", out.Levels[1].Used)
	}
}

// A member over its guarantee borrows only what the parent has unused:
// with the org's tokens spent by its sibling, it is refused by the org;
// one token's refill later it borrows exactly that token.
func TestRateBorrowsOnlyUnused(t *testing.T) {
	o := newOrgOfTwo()
	o.a = State{GAt: t0, GLeft: 0} // both guarantees spent at t0
	o.b = State{GAt: t0, GLeft: 0}
	var out Outcome
	for i, p := range [10][]Node{o.pathB(), o.pathB(), o.pathB(), o.pathB(), o.pathB(), o.pathB(), o.pathB(), o.pathB(), o.pathA(), o.pathA()} {
		if !Spend(p, 1, t0, &out) || out.Levels[0].Borrowed != 1 {
			t.Fatalf("borrow %d of the org's burst: %+v", i, out)
		}
	}
	if Spend(o.pathA(), 1, t0, &out) || out.Refused != 1 {
		t.Fatalf("A borrowed from an empty org: %+v", out)
	}
	if out.Wait != sec/100 {
		t.Fatalf("wait hint %v ns, want one org token's refill, 10 ms", out.Wait)
	}
	// 10 ms on, the org holds one token and A's guarantee half a token:
	// A spends the half as guaranteed and borrows the other half.
	if !Spend(o.pathA(), 1, t0+sec/100, &out) {
		t.Fatalf("A refused with a token unused: %+v", out)
	}
	if g, b := out.Levels[0].Guaranteed, out.Levels[0].Borrowed; g != 0.5 || b != 0.5 {
		t.Fatalf("A's parts guaranteed %v borrowed %v, want 0.5 and 0.5", g, b)
	}
	if Spend(o.pathA(), 1, t0+sec/100, &out) || out.Refused != 1 {
		t.Fatalf("A borrowed more than the org had unused: %+v", out)
	}
}

// A refusal at any level leaves every level's state as it was; the level
// that refused is the one whose pool lacks the tokens.
func TestRateAllOrNothing(t *testing.T) {
	key, team, org := bucket(10, 2), bucket(20, 5), bucket(30, 3)
	cases := []struct {
		key, team, org float64 // tokens held at t0
		refused        int
	}{
		{key: 1, team: 5, org: 3, refused: 0},
		{key: 2, team: 1, org: 3, refused: 1},
		{key: 2, team: 5, org: 1, refused: 2},
		{key: 2, team: 5, org: 3, refused: -1},
	}
	for _, c := range cases {
		// Guarantees spent: each level above the key is asked to lend.
		s := [3]State{{At: t0, Level: c.key, GAt: t0}, {At: t0, Level: c.team, GAt: t0}, {At: t0, Level: c.org}}
		path := []Node{{Limit: key, Guarantee: 0.5, State: &s[0]}, {Limit: team, Guarantee: 0.5, State: &s[1]}, {Limit: org, State: &s[2]}}
		before := s
		var out Outcome
		ok := Spend(path, 2, t0, &out)
		if out.Refused != c.refused || ok != (c.refused < 0) {
			t.Fatalf("%+v: refused at %d (%+v)", c, out.Refused, out)
		}
		if !ok && s != before {
			t.Fatalf("%+v: a refusal changed state: %+v → %+v", c, before, s)
		}
		if ok && (s[0].Level != 0 || s[1].Level != c.team-2 || s[2].Level != c.org-2) {
			t.Fatalf("%+v: allowed but not spent at every level: %+v", c, s)
		}
	}
}
