package nested

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateSharesNamesTheChildren(t *testing.T) {
	ok := []Share{{"team-a", "guarantee", 50}, {"team-b", "guarantee", 50}, {"team-c", "guarantee", 0}}
	if err := ValidateShares("org", ok); err != nil {
		t.Fatalf("100 %% in all: %v", err)
	}
	// Decimal fractions that add up to 100 % in decimal, not in binary.
	thirds := []Share{{"a", "guarantee", 33.3}, {"b", "guarantee", 33.3}, {"c", "guarantee", 33.4}}
	if err := ValidateShares("org", thirds); err != nil {
		t.Fatalf("33.3 + 33.3 + 33.4: %v", err)
	}
	over := []Share{{"team-a", "guarantee", 60}, {"team-b", "guarantee", 50}, {"team-c", "guarantee", 0}}
	err := ValidateShares("org", over)
	var se *SharesError
	if !errors.As(err, &se) || se.OutOfRange || se.Total != 110 || len(se.Shares) != 2 {
		t.Fatalf("110 %%: %#v", err)
	}
	if want := "the guarantees of org's children add up to 110%, over 100%: team-a guarantee 60%, team-b guarantee 50%"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	for _, p := range []float64{-1, 101, math.NaN()} {
		err := ValidateShares("org", []Share{{"team-a", "guarantee", 10}, {"team-b", "guarantee", p}})
		if !errors.As(err, &se) || !se.OutOfRange || se.Shares[0].Child != "team-b" || !strings.Contains(err.Error(), "team-b: guarantee") {
			t.Fatalf("%v %%: %v", p, err)
		}
	}
}

// Usage reads each level without changing it, and shows the parts and
// the use that a quota API shows.
func TestUsageReadsWithoutSpending(t *testing.T) {
	o := newCalOrg()
	var out Outcome
	Spend(o.path(&o.a), 600, t0, &out)
	if l := out.Levels[0]; l.Guaranteed != 500 || l.Borrowed != 100 || l.Used != 600 || l.Ceiling != 800 || l.Remaining != 200 || l.GuaranteeLeft != 0 || l.GuaranteedUsed != 500 {
		t.Fatalf("A's level: %+v", l)
	}
	if l := out.Levels[1]; l.Used != 600 || l.Ceiling != 1000 || l.Remaining != 400 {
		t.Fatalf("the org's level: %+v", l)
	}
	before := [3]State{o.org, o.a, o.b}
	Usage(o.path(&o.b), t0, &out)
	if !out.OK() || before != [3]State{o.org, o.a, o.b} {
		t.Fatalf("Usage changed state or refused: %+v", out)
	}
	// B, not seen yet, would be granted the 400 left.
	if l := out.Levels[0]; l.GuaranteeLeft != 400 || l.Used != 0 {
		t.Fatalf("B's level: %+v", l)
	}
}
