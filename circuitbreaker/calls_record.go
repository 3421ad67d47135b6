package circuitbreaker

import (
	"github.com/sluicegw/sluice/ratelimit/replay"
)

// callRing is the number of calls a rule's record keeps at most: 1 MiB,
// 54 calls/s for 10 minutes (calls_replay.go says when it spans less).
const callRing = 1 << 15

// callRecorder keeps a rule's last callRing calls (replay.Ring: it grows
// from 64 records as it fills, and its writers do not wait).
type callRecorder struct{ ring replay.Ring }

func newCallRecorder() *callRecorder {
	return &callRecorder{ring: replay.Ring{Max: callRing}}
}

// add records one call: the latency and the outcome share a word.
func (c *callRecorder) add(r callRecord) {
	c.ring.Add(replay.Words{uint64(r.At), uint64(r.Lat)<<3 | uint64(r.Outcome), r.Key})
}

// since copies the calls from from on, in arrival order, and reports
// whether the ring overwrote calls at or after from (short).
func (c *callRecorder) since(from int64) (out []callRecord, short bool) {
	ws, short := c.ring.Copy(func(w replay.Words) bool { return int64(w[0]) >= from })
	out = make([]callRecord, len(ws))
	for i, w := range ws {
		out[i] = callRecord{At: int64(w[0]), Lat: int64(w[1] >> 3), Key: w[2], Outcome: callOutcome(w[1] & 7)}
	}
	sortCalls(out)
	return out, short
}
