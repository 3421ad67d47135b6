package grayroute

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicegw/sluice/rulestore/syntax"
)

// Ramp raises a rule's weight over wall-clock time. Every instance computes
// the same weight from the same clock, with no coordination.
//
// Two forms:
//
//	<start> <duration>                  linear from 0% at start to 100% at start+duration
//	<start> <interval> <w1>,<w2>,...    w1 from start, w2 from start+interval, ...; the last stays
//
// start is RFC 3339 (2026-12-01T10:00:00Z). Before start the ramp gives 0%.
type Ramp struct {
	Start time.Time
	// Linear ramp: Duration > 0 and Steps empty.
	Duration time.Duration
	// Step ramp: weights in basis points, one per Interval.
	Interval time.Duration
	Steps    []uint32
}

// ParseRamp parses the ramp syntax above.
func ParseRamp(s string) (*Ramp, error) {
	words := strings.Fields(s)
	if len(words) != 2 && len(words) != 3 {
		return nil, fmt.Errorf(`want "<start> <duration>" or "<start> <interval> <w1>,<w2>,..."`)
	}
	start, err := time.Parse(time.RFC3339, words[0])
	if err != nil {
		return nil, fmt.Errorf("start %q: want an RFC 3339 time such as 2026-12-01T10:00:00Z", words[0])
	}
	d, err := syntax.ParseDuration(words[1])
	if err != nil {
		return nil, fmt.Errorf("%q: %v", words[1], err)
	}
	if d <= 0 || d > syntax.MaxRuleDuration {
		return nil, fmt.Errorf("%q: want a positive duration such as 10m or 2h, at most 366 days", words[1])
	}
	r := &Ramp{Start: start}
	if len(words) == 2 {
		r.Duration = d
		return r, nil
	}
	r.Interval = d
	var prev uint32
	for _, w := range strings.Split(words[2], ",") {
		bp, err := ParseWeight(strings.TrimSpace(w))
		if err != nil {
			return nil, fmt.Errorf("step %q: %v", w, err)
		}
		if bp < prev {
			return nil, fmt.Errorf("step %q: steps must not decrease (a lower weight would move canary users back)", w)
		}
		prev = bp
		r.Steps = append(r.Steps, bp)
	}
	return r, nil
}

// At returns the ramp's weight at now, in basis points.
func (r *Ramp) At(now time.Time) uint32 {
	elapsed := now.Sub(r.Start)
	if elapsed < 0 {
		return 0
	}
	if len(r.Steps) == 0 {
		if elapsed >= r.Duration {
			return Buckets
		}
		// float64: elapsed*Buckets would overflow int64 for ramps over ~10 days.
		return uint32(float64(elapsed) / float64(r.Duration) * Buckets)
	}
	i := int64(elapsed / r.Interval)
	if i >= int64(len(r.Steps)) {
		i = int64(len(r.Steps)) - 1
	}
	return r.Steps[i]
}

// ParseWeight parses a percentage 0–100 with up to two decimals (12.5) into
// basis points.
func ParseWeight(s string) (uint32, error) {
	f, ok := syntax.ParseNumber(s, 0, 100)
	if !ok {
		return 0, fmt.Errorf("want a percentage from 0 to 100")
	}
	bp := math.Round(f * 100)
	if math.Abs(f*100-bp) > 1e-6 {
		return 0, fmt.Errorf("at most two decimals")
	}
	return uint32(bp), nil
}
