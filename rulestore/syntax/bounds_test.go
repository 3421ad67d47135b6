package syntax

import (
	"slices"
	"testing"
	"time"
)

func TestBoundsExtremesAndOutside(t *testing.T) {
	for _, c := range []struct {
		b             *Bounds
		extremes, out []string
	}{
		{WholeBounds(0, 10), []string{"0", "10"}, []string{"-1", "11", "NaN"}},
		{NumberBounds(1, 1000).Open(), []string{"1.0000000000000002", "1000"}, []string{"1", "1000.0000000000001", "NaN", "Inf", "-Inf"}},
		{NumberBounds(0, 100).By(0.01).Open(), []string{"0.01", "100"}, []string{"0", "100.01", "NaN", "Inf", "-Inf"}},
		{DurationBounds(time.Millisecond, time.Minute), []string{"1ms", "1m0s"}, []string{"0s", "1m0.001s", "NaN"}},
	} {
		if got := c.b.Extremes(); !slices.Equal(got, c.extremes) {
			t.Errorf("%+v: extremes %q, want %q", *c.b, got, c.extremes)
		}
		if got := c.b.Outside(); !slices.Equal(got, c.out) {
			t.Errorf("%+v: outside %q, want %q", *c.b, got, c.out)
		}
	}
}
