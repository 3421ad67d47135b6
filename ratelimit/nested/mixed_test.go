package nested

import (
	"testing"
	"time"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

// What a node's children's guarantees are shares of: its guarantee when
// it has one at a parent of its kind (and windows), else its ceiling.
func TestSharesHandDownGuaranteesOfOneKind(t *testing.T) {
	hourly := &Limit{Quota: 50, Calendar: &engine.CalendarQuota{Period: engine.PeriodHour, Zone: time.UTC}}
	cases := []struct {
		name   string
		path   []Node
		want   float64 // share[0]'s QPS (bucket) or Quota (calendar)
		backed bool
	}{
		{"bucket under bucket", []Node{{Limit: bucket(80, 8), Guarantee: 0.5}, {Limit: bucket(100, 10)}}, 50, true},
		{"capped at its ceiling", []Node{{Limit: bucket(30, 8), Guarantee: 0.5}, {Limit: bucket(100, 10)}}, 30, true},
		{"no guarantee", []Node{{Limit: bucket(80, 8)}, {Limit: bucket(100, 10)}}, 80, false},
		{"day under day", []Node{{Limit: daily(800), Guarantee: 0.5}, {Limit: daily(1000)}}, 500, true},
		{"hour under day", []Node{{Limit: hourly, Guarantee: 0.5}, {Limit: daily(1000)}}, 50, false},
		{"bucket under day", []Node{{Limit: bucket(80, 8), Guarantee: 0.5}, {Limit: daily(1000)}}, 80, false},
		{"three buckets", []Node{{Limit: bucket(80, 8), Guarantee: 0.5}, {Limit: bucket(80, 8), Guarantee: 0.5}, {Limit: bucket(100, 10)}}, 25, true},
	}
	for _, c := range cases {
		var share [MaxDepth]Limit
		var backed [MaxDepth]bool
		shares(c.path, &share, &backed)
		got := share[0].QPS
		if share[0].Calendar != nil {
			got = share[0].Quota
		}
		if got != c.want || backed[0] != c.backed {
			t.Errorf("%s: share %v backed %v, want %v %v", c.name, got, backed[0], c.want, c.backed)
		}
	}
}

// A bucket team under a calendar org: its guarantee is units of the
// org's day, granted at its first spend; its bucket is only its ceiling.
func TestBucketUnderCalendar(t *testing.T) {
	org, team := daily(1000), bucket(100, 100)
	var so, sa, sb State
	path := func(s *State) []Node {
		return []Node{{Limit: team, Guarantee: 0.5, State: s}, {Limit: org, State: &so}}
	}
	var out Outcome
	if !Spend(path(&sb), 1, t0, &out) || out.Levels[0].GuaranteeLeft != 499 {
		t.Fatalf("B's first unit: %+v", out.Levels[0])
	}
	a := &stream{path: path(&sa), every: at(100), n: 1}
	run(t, t0+100*sec, a)
	// A's 500, the org's free 0 (B holds 499 reserved): its bucket would
	// have passed 100 + 100 s × 100/s.
	if a.admitted != 500 || a.refusedAt[1] == 0 {
		t.Fatalf("A admitted %v (refused by the org %d times), want 500", a.admitted, a.refusedAt[1])
	}
	if so.Level+so.Reserved != 1000 {
		t.Fatalf("org used %v reserved %v", so.Level, so.Reserved)
	}
}
