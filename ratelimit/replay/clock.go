package replay

import (
	"sync/atomic"
	"time"
)

// Clock is a coarse wall clock for the records of a Ring: reading it is
// one atomic load, where time.Now costs tens of ns on the request path.
// A goroutine sets it every Tick while it is read and stops after a
// second unread; the first read after that sets it and starts the
// goroutine again. It lags the wall clock by up to a Tick plus the
// goroutine's scheduling delay. The zero value is ready (Tick 0 is
// CoarseTick).
type Clock struct {
	Tick time.Duration

	ns      atomic.Int64
	read    atomic.Bool // read since the goroutine last looked
	running atomic.Bool
}

// CoarseTick is the tick of the clock the handlers' records read.
const CoarseTick = time.Millisecond

// Now is the clock's time, wall ns.
func (c *Clock) Now() int64 {
	if !c.running.Load() {
		c.start()
	}
	if !c.read.Load() {
		c.read.Store(true)
	}
	return c.ns.Load()
}

// start sets the clock and starts its goroutine, unless one runs.
func (c *Clock) start() {
	if !c.running.CompareAndSwap(false, true) {
		return
	}
	c.ns.Store(time.Now().UnixNano())
	c.read.Store(true)
	go c.run()
}

// run sets the clock every Tick and stops after a second unread.
func (c *Clock) run() {
	tick := c.Tick
	if tick <= 0 {
		tick = CoarseTick
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	idle := max(1, int(time.Second/tick))
	for n := 1; ; n++ {
		now := <-t.C
		c.ns.Store(now.UnixNano())
		if n%idle != 0 {
			continue
		}
		if !c.read.Swap(false) {
			c.running.Store(false)
			return
		}
	}
}
