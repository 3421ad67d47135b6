package replay

// BreakerTrips is what a circuit breaker's thresholds would have done to
// its recorded calls: how often its breakers opened under the settings in
// force and under the proposed ones (the `breaker` of an impact; absent
// for other kinds). The impact's refusal counts are the calls refused.
type BreakerTrips struct {
	TripsNow      int64 `json:"trips_now"`
	TripsProposed int64 `json:"trips_proposed"`
}

// mergeBreaker adds b to a (either may be nil).
func mergeBreaker(a, b *BreakerTrips) *BreakerTrips {
	if b == nil {
		return a
	}
	if a == nil {
		c := *b
		return &c
	}
	c := *a
	c.TripsNow += b.TripsNow
	c.TripsProposed += b.TripsProposed
	return &c
}
