package circuitbreaker

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/rulestore"
)

// callClock times a call, for its record and slow_call_duration.
type callClock struct {
	start time.Time // the precise arrival, read only for slow_call_duration
	at    int64     // the arrival, wall ns: start's, or the coarse clock's
	clock *replay.Clock
}

// startCall reads the clock at a call's arrival: precisely when the
// rule's slow_call_duration needs it, else the coarse clock (one atomic
// load; the record's latency is then good to its tick, 1 ms).
func startCall(precise bool, coarse *replay.Clock) callClock {
	if precise {
		now := time.Now()
		return callClock{start: now, at: now.UnixNano()}
	}
	return callClock{at: coarse.Now(), clock: coarse}
}

// latency is the time since the call's arrival, by the clock it read.
func (c callClock) latency() time.Duration {
	if !c.start.IsZero() {
		return time.Since(c.start)
	}
	return time.Duration(max(0, c.clock.Now()-c.at)) // the wall clock may step back
}

// recordCall records a call of breaker b of st that arrived at at (wall
// ns): refused, or ended with o after lat. The key is b's identity: the
// calls of one breaker replay on one fresh breaker (a key's breaker
// dropped and made again is a new one, live and in the replay).
func (st *ruleState) recordCall(b *Breaker, at int64, lat time.Duration, o callOutcome) {
	var key uint64
	if b != st.def {
		key = uint64(uintptr(unsafe.Pointer(b)))
	}
	st.calls.add(callRecord{At: at, Lat: int64(lat), Key: key, Outcome: o})
}

// callsPreviewer answers the store's previews of circuit_breaker rules
// (rulestore.Previewer): it replays a rule's recorded calls through fresh
// breakers with the settings in force and the proposed ones
// (calls_replay.go).
type callsPreviewer struct{ store *rulestore.App }

// Impact replays the last window of rule id's calls (rulestore.Previewer).
func (p callsPreviewer) Impact(id string, proposed any, window time.Duration) (replay.Impact, error) {
	prop, ok := proposed.(*Rule)
	if !ok {
		return replay.Impact{}, fmt.Errorf("circuit_breaker rule %q: not a circuit breaker rule (%T)", id, proposed)
	}
	empty := rulestore.EmptyImpact(window)
	st, ok := shared.Load(id)
	cur := p.store.Lookup(rulestore.CircuitBreaker, id)
	if !ok || cur == nil {
		return empty, nil
	}
	curRule, ok := cur.Value.(*Rule)
	if !ok {
		return empty, nil
	}
	recs, short := st.calls.since(time.Now().UnixNano() - int64(window))
	imp := callsImpact(recs, curRule, prop)
	imp.Window, imp.Instances = empty.Window, empty.Instances
	if short {
		imp.Approximate = append([]string{"short: the rule's record (32768 calls) spans less than the window"}, imp.Approximate...)
	}
	return imp, nil
}
