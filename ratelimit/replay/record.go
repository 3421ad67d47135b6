package replay

// Outcome is what the rule in force did with a recorded request.
type Outcome uint8

const (
	Allowed Outcome = iota
	RateRefused
	InFlightRefused      // max_concurrent of the key
	InFlightTotalRefused // max_concurrent_total of the rule
	// OtherRefused: refused by what a replay does not decide (the
	// adaptive in-flight limit, Redis unavailable); replayed as refused
	// by both rules.
	OtherRefused
)

// Refused reports whether o refused the request.
func (o Outcome) Refused() bool { return o != Allowed }

// Arrival is what the caller knows of one decided request.
type Arrival struct {
	At   int64 // engine ns (engine.Now)
	Cost int64
	// KeyInFlight and TotalInFlight are the requests in flight of the
	// request's key and of the rule when it arrived (before it took a
	// slot): what max_concurrent and max_concurrent_total compare.
	KeyInFlight, TotalInFlight int64
	Outcome                    Outcome
}

// Record is one recorded request: 32 bytes, no pointer, so a ring of
// them is one allocation the garbage collector does not scan.
type Record struct {
	At    int64
	Key   uint64 // the resolved key's hash under the recorder's seed
	Cost  uint32 // clipped to 2³²−1
	Total uint32 // TotalInFlight, clipped
	// KeyIn is KeyInFlight clipped to 65535.
	KeyIn   uint16
	Outcome Outcome
	Level   uint8 // the shard's sampling level when recorded
}

func clip32(v int64) uint32 {
	return uint32(min(max(v, 0), 1<<32-1))
}

func clip16(v int64) uint16 {
	return uint16(min(max(v, 0), 1<<16-1))
}
