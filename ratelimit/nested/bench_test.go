package nested

import "testing"

// BenchmarkSpendThreeLevels: a key's spend at its team and org, token
// buckets, each level guaranteed at its parent; most spends pass.
func BenchmarkSpendThreeLevels(b *testing.B) {
	org, team, key := bucket(1e9, 1e6), bucket(1e9, 1e6), bucket(1e9, 1e6)
	var so, st, sk State
	path := []Node{{Limit: key, Guarantee: 0.5, State: &sk}, {Limit: team, Guarantee: 0.5, State: &st}, {Limit: org, State: &so}}
	var out Outcome
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 100
		Spend(path, 1, now, &out)
	}
	if !out.OK() {
		b.Fatalf("refused at %d", out.Refused)
	}
}

// BenchmarkSpendThreeLevelsCalendar: the same with daily quotas.
func BenchmarkSpendThreeLevelsCalendar(b *testing.B) {
	org, team, key := daily(1e15), daily(1e15), daily(1e15)
	var so, st, sk State
	path := []Node{{Limit: key, Guarantee: 0.5, State: &sk}, {Limit: team, Guarantee: 0.5, State: &st}, {Limit: org, State: &so}}
	var out Outcome
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 100
		Spend(path, 1, now, &out)
	}
	if !out.OK() {
		b.Fatalf("refused at %d", out.Refused)
	}
}
