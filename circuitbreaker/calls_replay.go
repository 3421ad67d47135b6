package circuitbreaker

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// A breaker's preview replays the calls its rule saw (calls_record.go)
// through fresh breakers with the settings in force and the proposed
// ones, on a clock that reads the recorded times (docs/design/previews.md).

// callOutcome is how a recorded call ended.
type callOutcome uint8

const (
	callSuccess callOutcome = iota
	callFailure
	callIgnored // neither (the client went away)
	callRefused // the breaker in force refused it: no upstream outcome
)

// callRecord is one call a breaker rule decided: 32 bytes, no pointer.
type callRecord struct {
	At      int64  // arrival, wall ns
	Lat     int64  // latency, ns (0 for a refused call)
	Key     uint64 // the breaker key's hash; 0 for the rule's default breaker
	Outcome callOutcome
}

// breakerRun is what one replay decided.
type breakerRun struct {
	refused []bool // by record
	trips   int    // times a breaker opened
}

// pendingCall is an admitted call that ends at end.
type pendingCall struct {
	end  int64
	b    *Breaker
	t    Ticket
	o    Outcome
	slow bool
}

type pendingCalls []pendingCall

func (p pendingCalls) Len() int           { return len(p) }
func (p pendingCalls) Less(i, j int) bool { return p[i].end < p[j].end }
func (p pendingCalls) Swap(i, j int)      { p[i], p[j] = p[j], p[i] }
func (p *pendingCalls) Push(x any)        { *p = append(*p, x.(pendingCall)) }
func (p *pendingCalls) Pop() any {
	old := *p
	x := old[len(old)-1]
	*p = old[:len(old)-1]
	return x
}

// replayCalls decides recs (in arrival order) on fresh breakers of s, one
// per key: each call asks at its arrival and, admitted, ends at its
// arrival plus its latency with its recorded outcome (a call the breaker
// in force refused has none: admitted here, it ends at once, ignored).
func replayCalls(recs []callRecord, s Settings, slowCall time.Duration) breakerRun {
	var now int64
	clock := func() int64 { return now }
	run := breakerRun{refused: make([]bool, len(recs))}
	onTransition := func(tr Transition) {
		if tr.To == StateOpen {
			run.trips++
		}
	}
	breakers := map[uint64]*Breaker{}
	var pending pendingCalls
	for i, r := range recs {
		for len(pending) > 0 && pending[0].end <= r.At {
			p := heap.Pop(&pending).(pendingCall)
			now = max(now, p.end)
			p.b.Record(p.t, p.o, p.slow)
		}
		now = max(now, r.At)
		b := breakers[r.Key]
		if b == nil {
			b = NewBreaker(s, clock, onTransition)
			breakers[r.Key] = b
		}
		t, ok, _ := b.Allow()
		if !ok {
			run.refused[i] = true
			continue
		}
		p := pendingCall{end: r.At + r.Lat, b: b, t: t, o: Outcome(r.Outcome),
			slow: slowCall > 0 && r.Outcome != callRefused && time.Duration(r.Lat) >= slowCall}
		if r.Outcome == callRefused {
			p.end, p.o = r.At, Ignored
		}
		heap.Push(&pending, p)
	}
	for len(pending) > 0 {
		p := heap.Pop(&pending).(pendingCall)
		now = max(now, p.end)
		p.b.Record(p.t, p.o, p.slow)
	}
	return run
}

// callsImpact replays recs under the settings in force and the proposed
// ones and counts the calls and keys each refuses.
func callsImpact(recs []callRecord, cur, prop *Rule) replay.Impact {
	now := replayCalls(recs, cur.Settings, cur.SlowCallDuration)
	next := replayCalls(recs, prop.Settings, prop.SlowCallDuration)
	imp := replay.Impact{Requests: int64(len(recs)), Records: int64(len(recs)), TopKeys: []replay.KeyImpact{},
		Breaker: &replay.BreakerTrips{TripsNow: int64(now.trips), TripsProposed: int64(next.trips)}}
	newlyRefused, newlyAllowed := map[uint64]bool{}, map[uint64]bool{}
	for i, r := range recs {
		if r.Outcome == callRefused {
			imp.RefusedRecorded++
		}
		a, b := now.refused[i], next.refused[i]
		imp.RefusedNow += b2i(a)
		imp.RefusedProposed += b2i(b)
		switch {
		case b && !a:
			imp.NewlyRefused++
			newlyRefused[r.Key] = true
		case a && !b:
			imp.NewlyAllowed++
			newlyAllowed[r.Key] = true
		}
	}
	imp.KeysNewlyRefused, imp.KeysNewlyAllowed = int64(len(newlyRefused)), int64(len(newlyAllowed))
	if imp.RefusedRecorded > 0 {
		imp.Approximate = append(imp.Approximate, "refused calls: the calls the breaker in force refused have no upstream outcome; admitted by a replay they end at once, neither success nor failure")
	}
	imp.Approximate = append(imp.Approximate, "probes: half-open probes are the calls that arrive first after the open time, and a ramp after closing admits at random")
	return imp
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// sortCalls sorts records by arrival.
func sortCalls(recs []callRecord) {
	slices.SortStableFunc(recs, func(a, b callRecord) int { return cmp.Compare(a.At, b.At) })
}
