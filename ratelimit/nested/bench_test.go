package nested

import "testing"

// BenchmarkSpendThreeLevels: a key's spend at its team and org, each
// level guaranteed at its parent; every spend passes.
func BenchmarkSpendThreeLevels(b *testing.B) {
	b.Run("bucket", func(b *testing.B) { benchThreeLevels(b, bucket(1e9, 1e6)) })
	b.Run("calendar", func(b *testing.B) { benchThreeLevels(b, daily(1e15)) })
}

func benchThreeLevels(b *testing.B, l *Limit) {
	var so, st, sk State
	path := []Node{{Limit: l, Guarantee: 0.5, State: &sk}, {Limit: l, Guarantee: 0.5, State: &st}, {Limit: l, State: &so}}
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
