package circuitbreaker

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/rulestore"
)

// recordCall records a call of breaker b of st that arrived at start:
// refused, or ended with o after lat. The key is b's identity: the calls
// of one breaker replay on one fresh breaker (a key's breaker dropped and
// made again is a new one, live and in the replay).
func (st *ruleState) recordCall(b *Breaker, start time.Time, lat time.Duration, o callOutcome) {
	var key uint64
	if b != st.def {
		key = uint64(uintptr(unsafe.Pointer(b)))
	}
	st.calls.ring.Add(callRecord{At: start.UnixNano(), Lat: int64(lat), Key: key, Outcome: o})
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
