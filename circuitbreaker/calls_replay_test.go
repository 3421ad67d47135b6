package circuitbreaker

import (
	"testing"
	"time"
)

func thresholdRule(failures int) *Rule {
	return &Rule{Settings: Settings{FailureThreshold: failures, SuccessThreshold: 1, OpenDuration: time.Second,
		HalfOpenRequests: 1}}
}

// A lowered failure threshold trips on a run of failures the threshold
// in force lets through: the calls after the trip are refused until the
// open time is over, and a success of the half-open probe closes it.
func TestCallsImpactLowerThresholdTrips(t *testing.T) {
	var recs []callRecord
	ms := int64(time.Millisecond)
	for i := range int64(20) { // 20 failures of key 1, 100 ms apart, 10 ms each
		recs = append(recs, callRecord{At: i * 100 * ms, Lat: 10 * ms, Key: 1, Outcome: callFailure})
	}
	for i := range int64(20) { // then 20 successes
		recs = append(recs, callRecord{At: (2000 + i*100) * ms, Lat: 10 * ms, Key: 1, Outcome: callSuccess})
	}
	recs = append(recs, callRecord{At: 10, Lat: ms, Key: 2, Outcome: callSuccess}) // another key, untouched
	sortCalls(recs)
	imp := callsImpact(recs, thresholdRule(50), thresholdRule(5))
	t.Logf("%+v %+v", imp, *imp.Breaker)
	// Threshold 5: trips as the 5th failure ends (410 ms); open 1 s refuses
	// the calls at 500..1400 ms (10); the probe at 1500 ms fails and reopens
	// it for 1 s (no max_open_duration: no growth): 1600..2500 ms refused
	// (10); the probe at 2600 ms succeeds and closes.
	if imp.Breaker.TripsNow != 0 || imp.Breaker.TripsProposed != 2 || imp.RefusedNow != 0 || imp.NewlyRefused != 20 ||
		imp.RefusedProposed != 20 || imp.NewlyAllowed != 0 || imp.KeysNewlyRefused != 1 || imp.Requests != 41 {
		t.Errorf("impact %+v, breaker %+v", imp, *imp.Breaker)
	}
	back := callsImpact(recs, thresholdRule(5), thresholdRule(50))
	if back.NewlyAllowed != 20 || back.NewlyRefused != 0 || back.Breaker.TripsNow != 2 {
		t.Errorf("raised back: %+v", back)
	}
}
