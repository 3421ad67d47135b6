package engine

import "time"

// epoch anchors the monotonic clock; ns since epoch are never 0 in practice
// (a zero time means "new" to the token bucket), so it starts at 1s.
var epoch = time.Now().Add(-time.Second)

func Now() int64 { return int64(time.Since(epoch)) }

// At is the engine time (Now's clock) of wall-clock time t.
func At(t time.Time) int64 { return int64(t.Sub(epoch)) }
