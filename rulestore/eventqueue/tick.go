package eventqueue

import (
	"context"
	"time"
)

// TickInterval is the period of the tick.
const TickInterval = time.Second

// RunTicks calls each of fns once every TickInterval until ctx is done,
// while active reports that this config is the running one: while a reload
// overlaps two configs, only the active one's tick calls them.
func RunTicks(ctx context.Context, active func() bool, fns []func(now time.Time)) {
	t := time.NewTicker(TickInterval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			if !active() {
				continue
			}
			for _, fn := range fns {
				fn(now)
			}
		case <-ctx.Done():
			return
		}
	}
}
