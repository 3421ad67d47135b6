package circuitbreaker

import (
	"fmt"
	"testing"
	"time"
)

// The transitions the status page lists are bounded in number and in age.
func TestTransitionLogKeepsTheLastHourBounded(t *testing.T) {
	var l transitionLog
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < transitionsMax+50; i++ {
		l.add(TransitionRecord{At: start.Add(time.Duration(i) * time.Second), Key: fmt.Sprint(i), From: "closed", To: "open"})
	}
	got := l.recent(start.Add(time.Duration(transitionsMax+50) * time.Second))
	if len(got) != transitionsMax {
		t.Fatalf("%d transitions kept, want %d", len(got), transitionsMax)
	}
	if got[0].Key != fmt.Sprint(transitionsMax+49) {
		t.Errorf("newest first: first is %s", got[0].Key)
	}
	// An hour and a bit later, only the transitions of the last hour.
	later := start.Add(time.Hour + 100*time.Second)
	for _, r := range l.recent(later) {
		if later.Sub(r.At) > transitionsKept {
			t.Errorf("transition of %v listed at %v: older than %v", r.At, later, transitionsKept)
		}
	}
	if n := len(l.recent(later)); n != 150 {
		t.Errorf("%d transitions within the hour, want 150", n)
	}
}

// Keys are listed worst first (open, half-open, forced, closed), then by key.
func TestWorstFirst(t *testing.T) {
	keys := []BreakerState{{Key: "a", State: "closed"}, {Key: "b", State: "half_open"}, {Key: "c", State: "open"},
		{Key: "d", State: "forced_closed"}, {Key: "e", State: "forced_open"}, {Key: "f", State: "open"}}
	worstFirst(keys)
	var got string
	for _, k := range keys {
		got += k.Key
	}
	if got != "cefbda" {
		t.Errorf("order %s, want cefbda", got)
	}
}
