package circuitbreaker

import (
	"github.com/sluicegw/sluice/ratelimit/replay"
)

// callRing is the number of calls a rule's record keeps at most: 1 MiB,
// 54 calls/s for 10 minutes (calls_replay.go says when it spans less).
const callRing = 1 << 15

// callRecorder keeps a rule's last callRing calls (replay.Ring: it grows
// from 64 records as it fills).
type callRecorder struct{ ring replay.Ring[callRecord] }

func newCallRecorder() *callRecorder {
	return &callRecorder{ring: replay.Ring[callRecord]{Max: callRing}}
}

// since copies the calls from from on, in arrival order, and reports
// whether the ring overwrote calls at or after from (short).
func (c *callRecorder) since(from int64) (out []callRecord, short bool) {
	out, short = c.ring.Copy(func(r *callRecord) bool { return r.At >= from })
	sortCalls(out)
	return out, short
}
