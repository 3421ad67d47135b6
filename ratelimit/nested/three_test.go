package nested

import "testing"

// Three levels: keys → teams → org. The org has 100/s (burst 10); teams A
// and B are guaranteed 50 % each and capped at 80/s; in team A, keys k1
// and k2 are guaranteed 50 % of the team's 80/s each (40/s) and capped at
// the team's 80/s; team B has one key k3, guaranteed 100 %.
func TestThreeLevelsGuaranteesNest(t *testing.T) {
	org, team, key := bucket(100, 10), bucket(80, 8), bucket(80, 8)
	var so, sa, sb, s1, s2, s3 State
	path := func(k *State, g float64, tm *State) []Node {
		return []Node{{Limit: key, Guarantee: g, State: k}, {Limit: team, Guarantee: 0.5, State: tm}, {Limit: org, State: &so}}
	}
	k1 := &stream{path: path(&s1, 0.5, &sa), every: at(300), n: 1}
	k2 := &stream{path: path(&s2, 0.5, &sa), every: at(20), n: 1, next: t0 + 1}
	k3 := &stream{path: path(&s3, 1, &sb), every: at(300), n: 1, next: t0 + 2}
	run(t, t0+10*sec, k1, k2, k3)
	t.Logf("10 s: k1 %v, k2 %v (team A %v), k3 %v (team B); k1 refused at %v", k1.admitted, k2.admitted, k1.admitted+k2.admitted, k3.admitted, k1.refusedAt[:3])
	// k2 asks 20/s, under its 40/s at team A, and team A's 50/s at the
	// org covers it: it is never refused.
	if k2.admitted != 200 {
		t.Errorf("k2 admitted %v of 200, under its guarantee", k2.admitted)
	}
	// Each team gets its guarantee at the org (500 in 10 s) with the
	// tolerance of the two-team case: the org's burst and the guaranteed
	// bursts.
	teamA, teamB := k1.admitted+k2.admitted, k3.admitted
	if teamA < 500 || teamA > 520 || teamB < 500 || teamB > 520 {
		t.Errorf("team A %v, team B %v in 10 s, want 500 to 520 each", teamA, teamB)
	}
	if bound := rateBound(org, 10*sec, 0.5, 0.5); teamA+teamB > bound {
		t.Errorf("org passed %v, over its bound %v", teamA+teamB, bound)
	}
	// k1's refusals come from the org (team A is over its guarantee there
	// and the org has nothing unused), not from its team or itself.
	if k1.refusedAt[0] != 0 || k1.refusedAt[1] != 0 || k1.refusedAt[2] == 0 {
		t.Errorf("k1 refused at levels %v, want at the org only", k1.refusedAt[:3])
	}
	// Team B idle: team A's keys borrow up to team A's ceiling.
	k3.every = 0
	k1.admitted, k2.admitted = 0, 0
	run(t, t0+20*sec, k1, k2)
	if got := k1.admitted + k2.admitted; got < 0.95*800 || got > 808 {
		t.Errorf("team A with B idle admitted %v in 10 s, want its ceiling 800", got)
	}
}

// A key's guarantee is a share of its team's guarantee at the org (here
// 50 % of 50/s, burst 5: 25/s, burst 2.5), so it holds end to end: with
// the org drained and the team's guarantee spent by a sibling's
// borrowing, the key's guaranteed spend still passes, the team's
// guarantee going into debt for it (down to minus its burst, 5). A key
// without a guarantee in the same spot borrows at the team, and the team
// at the org: refused by the org.
func TestThreeLevelsGuaranteeHoldsEndToEnd(t *testing.T) {
	org, team, key := bucket(100, 10), bucket(80, 8), bucket(80, 8)
	so := State{At: t0, Level: 0}                    // the org drained
	sa := State{At: t0, Level: 8, GAt: t0, GLeft: 0} // team A's guarantee spent
	var sk, sn State                                 // new keys: full buckets and guarantees
	path := func(k *State, g float64) []Node {
		return []Node{{Limit: key, Guarantee: g, State: k}, {Limit: team, Guarantee: 0.5, State: &sa}, {Limit: org, State: &so}}
	}
	var out Outcome
	if Spend(path(&sn, 0), 1, t0, &out) || out.Refused != 2 {
		t.Fatalf("a key without a guarantee: want refused by the org: %+v", out.Levels[:3])
	}
	for i := 0; i < 2; i++ {
		if !Spend(path(&sk, 0.5), 1, t0, &out) {
			t.Fatalf("spend %d within the key's guarantee refused at %d", i, out.Refused)
		}
		if out.Levels[0].Guaranteed != 1 || out.Levels[1].Guaranteed != 1 {
			t.Fatalf("spend %d not guaranteed at every level: %+v", i, out.Levels[:3])
		}
	}
	if sa.GLeft != -2 || so.Level != -2 {
		t.Fatalf("team's guarantee %v, org's tokens %v, want both -2 (debt)", sa.GLeft, so.Level)
	}
	// Over its guarantee (0.5 left), the key borrows: refused by the org.
	if Spend(path(&sk, 0.5), 1, t0, &out) || out.Refused != 2 {
		t.Fatalf("past its guarantee: want refused by the org: %+v", out.Levels[:3])
	}
	// The org's debt is paid back before anyone borrows: 20 ms on, the
	// org holds 0 and still lends nothing.
	if Spend(path(&sn, 0), 1, t0+sec/50, &out) || out.Refused != 2 {
		t.Fatalf("borrowed from an org in debt: %+v", out.Levels[:3])
	}
}
