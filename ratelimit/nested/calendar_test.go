package nested

import (
	"testing"
	"time"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

func daily(quota float64) *Limit {
	return &Limit{Quota: quota, Calendar: &engine.CalendarQuota{Period: engine.PeriodDay, Zone: time.UTC}}
}

// calOrg is an organisation of 1000 units a day with teams A and B, each
// guaranteed 50 % (500) and capped at 800.
type calOrg struct {
	org, a, b State
	orgL      *Limit
	teamL     *Limit
}

func newCalOrg() *calOrg { return &calOrg{orgL: daily(1000), teamL: daily(800)} }

func (o *calOrg) path(team *State) []Node {
	return []Node{{Limit: o.teamL, Guarantee: 0.5, State: team}, {Limit: o.orgL, State: &o.org}}
}

// spendUntilRefused spends 1 at a time on path at now until refused, and
// returns how many passed and the outcome of the refusal.
func spendUntilRefused(t *testing.T, path []Node, now int64, cap int) (int, Outcome) {
	t.Helper()
	var out Outcome
	for i := 0; i < cap; i++ {
		if !Spend(path, 1, now, &out) {
			return i, out
		}
	}
	t.Fatalf("still allowed after %d spends", cap)
	return cap, out
}

// A child never seen has no reserve: A alone borrows up to its ceiling;
// B, coming late, is granted what is left (200 of its 500) and the org
// never passes its quota.
func TestCalendarLateChildGetsWhatIsLeft(t *testing.T) {
	o := newCalOrg()
	got, out := spendUntilRefused(t, o.path(&o.a), t0, 2000)
	if got != 800 || out.Refused != 0 {
		t.Fatalf("A alone: %d passed, refused at %d; want its ceiling 800, refused by itself", got, out.Refused)
	}
	if l := out.Levels[0]; l.GuaranteedUsed != 500 || l.Used != 800 {
		t.Fatalf("A's use %+v: want 800 used, 500 of it guaranteed", l)
	}
	got, out = spendUntilRefused(t, o.path(&o.b), t0+sec, 2000)
	if got != 200 || out.Refused != 1 {
		t.Fatalf("B late: %d passed, refused at %d; want the 200 left, refused by the org", got, out.Refused)
	}
	if o.org.Level != 1000 || o.org.Reserved != 0 {
		t.Fatalf("org used %v reserved %v, want 1000 and 0", o.org.Level, o.org.Reserved)
	}
}

// A child seen first keeps its whole guarantee: B's first unit reserves
// 500 at the org, so A, busy all day, gets 500 and B the rest of its 500
// whenever it comes; the org is never over its quota.
func TestCalendarSeenChildKeepsItsGuarantee(t *testing.T) {
	o := newCalOrg()
	var out Outcome
	if !Spend(o.path(&o.b), 1, t0, &out) || out.Levels[0].Guaranteed != 1 || out.Levels[0].GuaranteeLeft != 499 {
		t.Fatalf("B's first unit: %+v", out.Levels[0])
	}
	got, out := spendUntilRefused(t, o.path(&o.a), t0+sec, 2000)
	if got != 500 || out.Refused != 1 {
		t.Fatalf("A: %d passed, refused at %d; want 500, refused by the org", got, out.Refused)
	}
	if r := out.Levels[1].Remaining; r != 0 {
		t.Fatalf("org remaining %v after A, want 0 (all used or reserved for B)", r)
	}
	got, out = spendUntilRefused(t, o.path(&o.b), t0+2*sec, 2000)
	if got != 499 || out.Refused != 1 {
		t.Fatalf("B: %d passed, refused at %d; want the 499 reserved for it", got, out.Refused)
	}
	if o.org.Level != 1000 {
		t.Fatalf("org used %v, want 1000", o.org.Level)
	}
	// The next day starts afresh: A alone borrows up to its ceiling.
	if got, _ := spendUntilRefused(t, o.path(&o.a), t0+24*int64(time.Hour), 2000); got != 800 {
		t.Fatalf("A the next day: %d, want 800", got)
	}
}

// Three calendar levels in the same windows: keys are guaranteed 50 % of
// their team's guarantee (250 of 500). k2's reserve at the team is backed
// by the team's guarantee at the org, so k1's borrowing cannot take it,
// even when k1 uses up everything else.
func TestCalendarThreeLevelsReserveEndToEnd(t *testing.T) {
	org, team, key := daily(1000), daily(800), daily(800)
	var so, sa, sb, s1, s2, s3 State
	path := func(k *State, tm *State) []Node {
		return []Node{{Limit: key, Guarantee: 0.5, State: k}, {Limit: team, Guarantee: 0.5, State: tm}, {Limit: org, State: &so}}
	}
	var out Outcome
	if !Spend(path(&s2, &sa), 1, t0, &out) {
		t.Fatalf("k2's first unit refused at %d", out.Refused)
	}
	got, out := spendUntilRefused(t, path(&s1, &sa), t0+1, 2000)
	// k1 takes the team's ceiling less k2's reserve (800 − 1 − 249), and
	// the org has it: B unseen reserves nothing.
	if got != 550 || out.Refused != 1 {
		t.Fatalf("k1: %d passed, refused at %d; want 550, refused by the team", got, out.Refused)
	}
	got, out = spendUntilRefused(t, path(&s2, &sa), t0+2, 2000)
	if got != 249 || out.Refused != 1 {
		t.Fatalf("k2: %d passed, refused at %d; want its 249 reserved, then the team's ceiling", got, out.Refused)
	}
	// Team B comes late: the org has 200 left, all granted to it.
	got, out = spendUntilRefused(t, path(&s3, &sb), t0+3, 2000)
	if got != 200 || out.Refused != 2 {
		t.Fatalf("team B: %d passed, refused at %d; want the org's last 200", got, out.Refused)
	}
	if so.Level != 1000 || sa.Level != 800 {
		t.Fatalf("org used %v, team A %v; want 1000 and 800", so.Level, sa.Level)
	}
}
