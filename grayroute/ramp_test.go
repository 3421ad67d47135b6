package grayroute

import (
	"testing"
	"time"
)

func TestRampSteps(t *testing.T) {
	r, err := ParseRamp("2026-12-01T10:00:00Z 10m 10,50,100")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at   time.Duration
		want uint32
	}{
		{-time.Second, 0}, {0, 1000}, {9 * time.Minute, 1000}, {10 * time.Minute, 5000},
		{19*time.Minute + 59*time.Second, 5000}, {20 * time.Minute, 10000}, {24 * time.Hour, 10000},
	} {
		if got := r.At(start.Add(c.at)); got != c.want {
			t.Errorf("at start%+v: %d bp, want %d", c.at, got, c.want)
		}
	}
}

func TestRampLinear(t *testing.T) {
	r, err := ParseRamp("2026-12-01T10:00:00+01:00 1h")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at   time.Duration
		want uint32
	}{{-time.Minute, 0}, {0, 0}, {15 * time.Minute, 2500}, {30 * time.Minute, 5000}, {time.Hour, 10000}, {2 * time.Hour, 10000}} {
		if got := r.At(start.Add(c.at)); got != c.want {
			t.Errorf("at start%+v: %d bp, want %d", c.at, got, c.want)
		}
	}
}

func TestRampLinearOverWeeks(t *testing.T) {
	r, err := ParseRamp("2026-12-01T00:00:00Z 720h")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if got := r.At(start.Add(360 * time.Hour)); got != 5000 {
		t.Errorf("half-way through a 30-day ramp: %d bp, want 5000", got)
	}
	if got := r.At(start.Add(719 * time.Hour)); got < 9980 || got >= 10000 {
		t.Errorf("an hour before the end of a 30-day ramp: %d bp", got)
	}
}

func TestRampErrors(t *testing.T) {
	for _, s := range []string{"", "tomorrow 1h", "2026-12-01T10:00:00Z -1h", "2026-12-01T10:00:00Z 1h 50,10",
		"2026-12-01T10:00:00Z 1h 10,x", "2026-12-01T10:00:00Z 1h 10,101", "2026-12-01T10:00:00Z 1h 1 2"} {
		if _, err := ParseRamp(s); err == nil {
			t.Errorf("ParseRamp(%q): want an error", s)
		}
	}
}

func TestParseWeight(t *testing.T) {
	for s, want := range map[string]uint32{"0": 0, "20": 2000, "12.5": 1250, "0.01": 1, "100": 10000} {
		if got, err := ParseWeight(s); err != nil || got != want {
			t.Errorf("ParseWeight(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"-1", "100.5", "abc", "12.345", ""} {
		if _, err := ParseWeight(s); err == nil {
			t.Errorf("ParseWeight(%q): want an error", s)
		}
	}
}
