package overload

import (
	"sync"
	"sync/atomic"
)

// Outcome is what became of a request.
type Outcome uint8

const (
	// Admitted: it holds a slot; Release it when it ends.
	Admitted Outcome = iota
	// Queued: it waits; receive from Waiter.Ready, or Abandon.
	Queued
	// QueueFull: refused on arrival, max_queued waiters more important
	// than it (or its own key's) were waiting.
	QueueFull
	// TimedOut: refused after waiting max_queue_wait (or its client left).
	TimedOut
	// PushedOut: refused while waiting, its place given to a more
	// important request (or to a key with fewer waiters).
	PushedOut
)

var outcomeNames = [...]string{"admitted", "queued", "queue_full", "queue_timeout", "pushed_out"}

func (o Outcome) String() string { return outcomeNames[o] }

// Ticket is an admitted request's slot: the limit's epoch when it was
// taken and, for one taken under the queue's lock, its key's account
// (share.go).
type Ticket struct {
	epoch uint32
	key   *keyState
}

// Waiter is a request waiting for a slot.
type Waiter = waiter

// Ready gets a value when the waiter is granted a slot or pushed out;
// Result then says which.
func (w *waiter) Ready() <-chan struct{} { return w.ready }

// Since is when the waiter began to wait.
func (w *waiter) Since() int64 { return w.since }

// Controller is one rule's adaptive limit and its queue. Admission takes
// no lock while nobody waits and a slot is free; a request that finds the
// limit full, and a release while requests wait, take the queue's lock.
type Controller struct {
	mu  sync.Mutex
	lim limit // under mu, but for record and due
	q   queue // under mu

	limitNow atomic.Int64 // lim.current(), for the lock-free path
	inflight atomic.Int64
	// queued is the number of waiters, plus arrivals deciding under the
	// lock: while it is not 0 an arrival joins the queue's order.
	queued  atomic.Int64
	byClass [Classes]atomic.Int64 // waiters per class
	shed    [Classes][3]atomic.Int64
	waited  [Classes]atomic.Int64 // admitted after waiting

	// Controlled delay (codel.go), under mu: when waiters were last
	// expired.
	lastExpire int64
	scratch    []*keyQueue
	lastNow    int64 // under mu: the latest time a caller gave

	// Fair shares (share.go), under mu: the keys waiting or holding a
	// slot taken under the lock, those whose queue stands, the slots
	// these hold (on loan), and when they were last marked.
	keys     map[string]*keyState
	freeKeys []*keyState // closed accounts, for reuse
	standing []*keyState
	loaned   int64
	lastMark int64

	pool sync.Pool
}

// New starts a controller at now with a probe of minRTT.
func New(cfg Config, now int64) *Controller {
	c := &Controller{}
	c.pool.New = func() any { return &waiter{ready: make(chan struct{}, 1)} }
	c.lim.init(cfg, now)
	c.limitNow.Store(c.lim.current())
	return c
}

// Configure takes new settings and keeps what was learnt (minRTT, the
// limit within the new bounds).
func (c *Controller) Configure(cfg Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lim.cfg = cfg
	c.lim.est = min(max(c.lim.est, float64(cfg.MinLimit)), float64(cfg.MaxLimit))
	c.limitNow.Store(c.lim.current())
	c.dispatchLocked(c.lastNow)
}

// TryAcquire admits a request at once if nobody waits and a slot is free.
func (c *Controller) TryAcquire() (Ticket, bool) {
	if c.queued.Load() != 0 {
		return Ticket{}, false
	}
	lim := c.limitNow.Load()
	for {
		n := c.inflight.Load()
		if n >= lim {
			return Ticket{}, false
		}
		if c.inflight.CompareAndSwap(n, n+1) {
			return Ticket{epoch: c.lim.epoch.Load()}, true
		}
	}
}

// Enqueue is the way in for a request TryAcquire did not admit: admitted
// after all (a slot freed, or one on loan from a standing key: share.go),
// queued (the returned waiter), or refused with QueueFull. key is the
// rule's key for the request (fairness within its class and between
// keys); it is copied.
func (c *Controller) Enqueue(class Class, key []byte, now int64) (Ticket, *Waiter, Outcome) {
	if class >= Classes {
		class = Normal
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastNow = max(c.lastNow, now)
	// Counted before the slot is looked at: a release that misses this
	// count freed its slot before the look, and one that sees it
	// dispatches after this lock is let go.
	c.queued.Add(1)
	c.lim.full = true
	if c.q.n > 0 {
		c.dispatchLocked(now) // waiters that may go first
	}
	ks := c.keyLocked(key)
	lim := c.limitNow.Load()
	for {
		n := c.inflight.Load()
		if !(c.q.n == 0 && n < lim) && !c.mayBorrowLocked(ks, class, n, lim) {
			break
		}
		if c.inflight.CompareAndSwap(n, n+1) {
			c.queued.Add(-1)
			c.addInflightLocked(ks, 1)
			return Ticket{epoch: c.lim.epoch.Load(), key: ks}, nil, Admitted
		}
	}
	if c.q.n >= c.lim.cfg.MaxQueued {
		v := c.q.victim(class, ks.key)
		if v == nil {
			c.queued.Add(-1)
			c.idleLocked(ks)
			c.shed[class][0].Add(1)
			return Ticket{}, nil, QueueFull
		}
		c.leaveLocked(v, pushedOut)
		v.ready <- struct{}{}
		ks = c.keyLocked(key) // closed if v was its only waiter
	}
	w := c.pool.Get().(*waiter)
	w.class, w.since, w.state, w.ks = class, now, waiting, ks
	c.addWaitingLocked(ks, 1)
	c.q.push(w, ks.key)
	c.byClass[class].Add(1)
	return Ticket{}, w, Queued
}

// leaveLocked takes w out of the queue with its new state.
func (c *Controller) leaveLocked(w *waiter, st waitState) {
	c.q.remove(w)
	c.addWaitingLocked(w.ks, -1)
	w.ks = nil
	c.queued.Add(-1)
	c.byClass[w.class].Add(-1)
	w.state = st
	switch st {
	case pushedOut:
		c.shed[w.class][2].Add(1)
	case abandoned:
		c.shed[w.class][1].Add(1)
	}
}

// Result is a waiter's outcome after Ready: Admitted (with its ticket),
// PushedOut, or TimedOut (a standing queue's target passed: codel.go). The waiter goes back to the pool: do not use it after.
func (c *Controller) Result(w *Waiter) (Ticket, Outcome) {
	c.mu.Lock()
	st, t := w.state, w.ticket
	c.mu.Unlock()
	c.recycle(w)
	switch st {
	case granted:
		return t, Admitted
	case abandoned: // waited past the target of a standing queue
		return Ticket{}, TimedOut
	}
	return Ticket{}, PushedOut
}

// Abandon ends a wait that Ready did not end (max_queue_wait passed, or
// the client left): TimedOut, or Admitted / PushedOut when that happened
// first. The waiter goes back to the pool.
func (c *Controller) Abandon(w *Waiter) (Ticket, Outcome) {
	c.mu.Lock()
	st, t := w.state, w.ticket
	if st == waiting {
		c.leaveLocked(w, abandoned)
	}
	c.mu.Unlock()
	c.recycle(w)
	switch st {
	case granted:
		return t, Admitted
	case pushedOut:
		return Ticket{}, PushedOut
	}
	return Ticket{}, TimedOut
}

func (c *Controller) recycle(w *waiter) {
	select { // a grant or push-out raced with the abandon
	case <-w.ready:
	default:
	}
	c.pool.Put(w)
}

// Release frees t's slot. latency is the upstream's time (ns), or < 0 when
// it says nothing of the upstream (the client left); drop: it failed (5xx,
// upstream error).
func (c *Controller) Release(t Ticket, latency int64, drop bool, now int64) {
	if latency >= 0 {
		c.lim.record(t.epoch, latency, drop)
	}
	if t.key != nil { // on its key's account, under the lock
		c.mu.Lock()
		c.inflight.Add(-1)
		c.addInflightLocked(t.key, -1)
		c.tickLocked(now)
		c.mu.Unlock()
		return
	}
	c.inflight.Add(-1)
	if c.queued.Load() > 0 || c.lim.due(now) {
		c.Tick(now)
	}
}

// Tick moves the limit if a window or probe is due and hands free slots
// to waiters.
func (c *Controller) Tick(now int64) {
	c.mu.Lock()
	c.tickLocked(now)
	c.mu.Unlock()
}

func (c *Controller) tickLocked(now int64) {
	c.lastNow = max(c.lastNow, now)
	if c.lim.due(now) && c.lim.step(now) {
		c.limitNow.Store(c.lim.current())
	}
	c.dispatchLocked(now)
}

// dispatchLocked gives slots to waiters: under the limit in the queue's
// order, and over it, while the standing keys hold more than the requests
// over it, to the keys whose queue does not stand (share.go).
func (c *Controller) dispatchLocked(now int64) {
	c.expireLocked(now)
	c.markStandingLocked(now)
	lim := c.limitNow.Load()
	for c.q.n > 0 {
		n := c.inflight.Load()
		if !c.borrowRoom(n, lim) {
			c.lim.full = true
			return
		}
		if !c.inflight.CompareAndSwap(n, n+1) {
			continue
		}
		var w *waiter
		if n < lim {
			w = c.q.pop()
		} else if w = c.q.popNotStanding(); w == nil {
			c.inflight.Add(-1)
			c.lim.full = true
			return
		}
		c.addInflightLocked(w.ks, 1)
		c.addWaitingLocked(w.ks, -1)
		w.state, w.ticket, w.ks = granted, Ticket{epoch: c.lim.epoch.Load(), key: w.ks}, nil
		c.queued.Add(-1)
		c.byClass[w.class].Add(-1)
		c.waited[w.class].Add(1)
		w.ready <- struct{}{}
	}
}

// Limit is the limit in force.
func (c *Controller) Limit() int64 { return c.limitNow.Load() }

// InFlight is the number of requests holding a slot.
func (c *Controller) InFlight() int64 { return c.inflight.Load() }

// State is a snapshot for the status page, metrics and tests.
type State struct {
	// Limit is the in-flight limit in force; InFlight the requests holding
	// a slot.
	Limit    int64 `json:"limit"`
	InFlight int64 `json:"in_flight"`
	// MinRTT is the last uncontended latency measured (s); Latency the
	// last window's latency (its clipped mean, s).
	MinRTT  float64 `json:"min_rtt"`
	Latency float64 `json:"latency"`
	// Probing: minRTT is being measured (the limit is at ¾ meanwhile).
	Probing bool `json:"probing"`
	// NextProbe is the time until the next probe (s): 0 while one runs,
	// about a sample window while probes follow one another (the last
	// found minRTT lower), else up to min_rtt_interval.
	NextProbe float64 `json:"next_probe"`
	// Classes: per priority class, the requests waiting now and since the
	// start those admitted after waiting and those refused by queue_full,
	// queue_timeout and pushed_out.
	Classes [Classes]ClassState `json:"-"`
}

// ClassState is one class's queue figures.
type ClassState struct {
	Waiting   int64 `json:"waiting"`
	Waited    int64 `json:"admitted_after_wait"`
	QueueFull int64 `json:"queue_full"`
	TimedOut  int64 `json:"queue_timeout"`
	PushedOut int64 `json:"pushed_out"`
}

// State reads the controller's state.
func (c *Controller) State() State {
	c.mu.Lock()
	s := State{Limit: c.limitNow.Load(), InFlight: c.inflight.Load(), MinRTT: float64(c.lim.minRTT) / 1e9,
		Latency: float64(c.lim.lastRTT) / 1e9, Probing: c.lim.probing, NextProbe: float64(c.lim.untilProbe(c.lastNow)) / 1e9}
	c.mu.Unlock()
	for i := range s.Classes {
		s.Classes[i] = ClassState{Waiting: c.byClass[i].Load(), Waited: c.waited[i].Load(),
			QueueFull: c.shed[i][0].Load(), TimedOut: c.shed[i][1].Load(), PushedOut: c.shed[i][2].Load()}
	}
	return s
}
