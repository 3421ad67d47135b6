package circuitbreaker

// This file is the circuit breaker state machine in plain Go: no Caddy, an
// injected clock, readable on its own.
//
//	closed ──trigger──▶ open ──open time over──▶ half-open ──successes──▶ closed
//	                     ▲                            │
//	                     └────────any failure─────────┘
//
// Triggers in the closed state: failure_threshold consecutive failures, or a
// failure rate / slow-call rate over a sliding window once it holds
// min_requests calls. Each trip without a close in between doubles the open
// time, up to MaxOpenDuration. After closing, an optional ramp admits a
// share of traffic rising from 10% to 100% over RampDuration.
//
// The hot path (Allow and Record on a closed breaker) uses atomics only.
// Every state change bumps a generation, packed with the state in one word;
// a call carries the word it was admitted under (its Ticket), so an outcome
// that arrives after the state moved on is ignored instead of being counted
// against the wrong state.

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// State is a breaker's state.
type State uint8

const (
	StateClosed State = iota
	StateOpen
	StateHalfOpen
	StateForcedOpen   // state force_open: rejects everything
	StateForcedClosed // state force_closed: admits everything, never trips
	StateDisabled     // state disabled: the handler passes requests through untouched
)

var stateNames = [...]string{"closed", "open", "half_open", "forced_open", "forced_closed", "disabled"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Mode is the rule's state field: auto, or an administrator's forced state.
type Mode uint8

const (
	ModeAuto Mode = iota
	ModeForceOpen
	ModeForceClosed
	ModeDisabled
)

// Settings are a breaker's thresholds. Zero disables a trigger.
type Settings struct {
	FailureThreshold int           // consecutive failures that trip; 0 = off
	SuccessThreshold int           // half-open successes that close (>= 1)
	OpenDuration     time.Duration // open time of the first trip (> 0)
	MaxOpenDuration  time.Duration // cap of the doubling open time; 0 = no growth
	WindowDuration   time.Duration // time window, in 10 buckets; or
	WindowCount      int           // count window of the last N calls
	FailureRate      float64       // percent of failures in the window that trips; 0 = off
	SlowCallRate     float64       // percent of slow calls in the window that trips; 0 = off
	MinRequests      int           // calls the window needs before a rate can trip
	HalfOpenRequests int           // concurrent half-open probes (>= 1)
	RampDuration     time.Duration // after closing, ramp traffic up over this; 0 = off
	Mode             Mode
}

func (s *Settings) hasWindow() bool { return s.FailureRate > 0 || s.SlowCallRate > 0 }

// Outcome is how a call ended.
type Outcome uint8

const (
	Success Outcome = iota
	Failure
	Ignored // e.g. the client went away: neither success nor failure
)

// Ticket is the state word a call was admitted under.
type Ticket uint64

// Transition describes one state change, for logs, events and metrics.
type Transition struct {
	From, To State
	Reason   string        // what caused it
	OpenFor  time.Duration // for To == StateOpen: time until half-open
	Trips    int           // consecutive trips so far (open-time growth)
}

const (
	stateBits = 3
	stateMask = 1<<stateBits - 1
	// rampFloor is the share of traffic a ramp starts with.
	rampFloor = 0.1
	// halfOpenRetry is the Retry-After of a request refused because every
	// half-open probe slot is taken, or by the ramp.
	halfOpenRetry = time.Second
	// timeBuckets is how many buckets a time window is split into.
	timeBuckets = 10
)

func stateOf(w uint64) State { return State(w & stateMask) }

// Breaker is one circuit breaker. Use NewBreaker.
type Breaker struct {
	now          func() int64 // nanoseconds on a monotonic clock
	rand         func() float64
	onTransition func(Transition)

	word      atomic.Uint64 // generation<<stateBits | state
	settings  atomic.Pointer[Settings]
	win       atomic.Pointer[window] // nil without rate triggers
	fails     atomic.Int64           // consecutive failures while closed
	openUntil atomic.Int64           // end of the open state (now() time)
	rampStart atomic.Int64
	rampEnd   atomic.Int64 // 0 when no ramp is running
	// probes counts half-open calls in flight. A probe keeps its slot
	// until it ends, even if the breaker reopened meanwhile, so no more
	// than HalfOpenRequests calls are ever at the downstream while the
	// breaker is not closed.
	probes atomic.Int64
	// successes counts the half-open period's successes; the low 32 bits
	// of the generation sit in the top half so a reset can never be undone
	// by a late call from an earlier period.
	successes atomic.Uint64

	mu    sync.Mutex // serialises transitions
	trips int        // guarded by mu
}

// NewBreaker returns a closed breaker. now returns nanoseconds on a
// monotonic clock (nil: the real clock); onTransition (may be nil) is called
// after each state change, outside any lock, and must not block.
func NewBreaker(s Settings, now func() int64, onTransition func(Transition)) *Breaker {
	if now == nil {
		start := time.Now()
		now = func() int64 { return int64(time.Since(start)) + 1 }
	}
	b := &Breaker{now: now, rand: rand.Float64, onTransition: onTransition}
	b.settings.Store(&s)
	b.word.Store(uint64(modeState(s.Mode)))
	if s.hasWindow() {
		b.win.Store(newWindow(&s))
	}
	return b
}

func modeState(m Mode) State {
	switch m {
	case ModeForceOpen:
		return StateForcedOpen
	case ModeForceClosed:
		return StateForcedClosed
	case ModeDisabled:
		return StateDisabled
	}
	return StateClosed
}

// State returns the current state. An open breaker whose open time is over
// reports open until a request moves it to half-open.
func (b *Breaker) State() State { return stateOf(b.word.Load()) }

// IsOpen reports whether the breaker rejects requests right now because it
// is open (and its open time is not over) or forced open.
func (b *Breaker) IsOpen() bool {
	switch stateOf(b.word.Load()) {
	case StateForcedOpen:
		return true
	case StateOpen:
		return b.now() < b.openUntil.Load()
	}
	return false
}

// Settings returns the settings in force.
func (b *Breaker) Settings() Settings { return *b.settings.Load() }

// Allow asks to admit a call. If ok, the caller must pass the ticket to
// Record exactly once when the call ends. If not, retryAfter is the time
// until the breaker may admit again (0 when unknown, e.g. forced open).
func (b *Breaker) Allow() (t Ticket, ok bool, retryAfter time.Duration) {
	for {
		w := b.word.Load()
		switch stateOf(w) {
		case StateClosed:
			if b.rampEnd.Load() != 0 && !b.rampAdmits() {
				return 0, false, halfOpenRetry
			}
			return Ticket(w), true, 0
		case StateForcedClosed, StateDisabled:
			return Ticket(w), true, 0
		case StateForcedOpen:
			return 0, false, 0
		case StateOpen:
			now := b.now()
			if until := b.openUntil.Load(); now < until {
				return 0, false, time.Duration(until - now)
			}
			b.halfOpen(w)
		case StateHalfOpen:
			limit := int64(b.settings.Load().HalfOpenRequests)
			p := b.probes.Load()
			if p >= limit {
				return 0, false, halfOpenRetry
			}
			if !b.probes.CompareAndSwap(p, p+1) {
				continue
			}
			if b.word.Load() != w {
				b.probes.Add(-1) // the state moved on meanwhile: start over
				continue
			}
			return Ticket(w), true, 0
		}
	}
}

// rampAdmits admits a rising share of calls while a ramp runs.
func (b *Breaker) rampAdmits() bool {
	end := b.rampEnd.Load()
	if end == 0 {
		return true
	}
	now := b.now()
	if now >= end {
		b.rampEnd.CompareAndSwap(end, 0)
		return true
	}
	start := b.rampStart.Load()
	share := rampFloor + (1-rampFloor)*float64(now-start)/float64(end-start)
	return b.rand() < share
}

// Record reports the outcome of a call admitted with t. slow says the call
// took at least the slow-call duration. An outcome from a call admitted in
// an earlier state is dropped (a probe's slot is still freed).
func (b *Breaker) Record(t Ticket, o Outcome, slow bool) {
	b.record(uint64(t), o, slow, true)
}

// Observe records an outcome against the current state without a ticket:
// for calls whose breaker could only be chosen after they ran (a key known
// only afterwards). In half-open it counts as a probe's outcome but took no
// probe slot.
func (b *Breaker) Observe(o Outcome, slow bool) {
	b.record(b.word.Load(), o, slow, false)
}

func (b *Breaker) record(t uint64, o Outcome, slow, ticketed bool) {
	if ticketed && stateOf(t) == StateHalfOpen {
		b.probes.Add(-1) // a probe ended: free its slot, whatever the state now
	}
	w := b.word.Load()
	if t != w {
		return // admitted in an earlier state
	}
	switch stateOf(w) {
	case StateClosed:
		if o == Ignored {
			return
		}
		s := b.settings.Load()
		if o == Failure {
			if n := b.fails.Add(1); s.FailureThreshold > 0 && n >= int64(s.FailureThreshold) {
				b.trip(w, "consecutive_failures")
				return
			}
		} else if b.fails.Load() != 0 {
			b.fails.Store(0)
		}
		win := b.win.Load()
		if win == nil {
			return
		}
		calls, failures, slows := win.add(b.now, o == Failure, slow)
		if calls < int64(s.MinRequests) || calls == 0 {
			return
		}
		switch {
		case s.FailureRate > 0 && float64(failures)*100 >= s.FailureRate*float64(calls):
			b.trip(w, "failure_rate")
		case s.SlowCallRate > 0 && float64(slows)*100 >= s.SlowCallRate*float64(calls):
			b.trip(w, "slow_call_rate")
		}
	case StateHalfOpen:
		gen := w >> stateBits << 32
		s := b.settings.Load()
		switch {
		case o == Ignored:
		case o == Failure:
			b.trip(w, "half_open_failure")
		case slow && s.SlowCallRate > 0:
			b.trip(w, "half_open_slow_call")
		default:
			for {
				n := b.successes.Load()
				if n&^0xffffffff != gen {
					return
				}
				if b.successes.CompareAndSwap(n, n+1) {
					if int(n&0xffffffff)+1 >= s.SuccessThreshold {
						b.close(w)
					}
					return
				}
			}
		}
	}
}

// openTime is the open time of the trips-th consecutive trip.
func openTime(s *Settings, trips int) time.Duration {
	d := s.OpenDuration
	if s.MaxOpenDuration <= d {
		return d
	}
	for i := 1; i < trips && d < s.MaxOpenDuration; i++ {
		d *= 2
	}
	return min(d, s.MaxOpenDuration)
}

// set moves from word w to state to under mu; false if w is stale.
func (b *Breaker) set(w uint64, to State) (uint64, bool) {
	if b.word.Load() != w {
		return 0, false
	}
	nw := (w>>stateBits+1)<<stateBits | uint64(to)
	b.successes.Store(nw >> stateBits << 32)
	return nw, true
}

func (b *Breaker) trip(w uint64, reason string) {
	b.mu.Lock()
	nw, ok := b.set(w, StateOpen)
	if !ok {
		b.mu.Unlock()
		return
	}
	s := b.settings.Load()
	b.trips++
	d := openTime(s, b.trips)
	b.openUntil.Store(b.now() + int64(d))
	b.rampEnd.Store(0)
	b.word.Store(nw)
	tr := Transition{From: stateOf(w), To: StateOpen, Reason: reason, OpenFor: d, Trips: b.trips}
	b.mu.Unlock()
	b.notify(tr)
}

func (b *Breaker) halfOpen(w uint64) {
	b.mu.Lock()
	nw, ok := b.set(w, StateHalfOpen)
	if !ok {
		b.mu.Unlock()
		return
	}
	b.word.Store(nw)
	tr := Transition{From: StateOpen, To: StateHalfOpen, Reason: "open_time_over", Trips: b.trips}
	b.mu.Unlock()
	b.notify(tr)
}

func (b *Breaker) close(w uint64) {
	b.mu.Lock()
	nw, ok := b.set(w, StateClosed)
	if !ok {
		b.mu.Unlock()
		return
	}
	b.resetClosed()
	b.word.Store(nw)
	tr := Transition{From: stateOf(w), To: StateClosed, Reason: "success_threshold"}
	b.mu.Unlock()
	b.notify(tr)
}

// resetClosed prepares a fresh closed state; caller holds mu.
func (b *Breaker) resetClosed() {
	s := b.settings.Load()
	b.trips = 0
	b.fails.Store(0)
	if s.hasWindow() {
		b.win.Store(newWindow(s))
	} else {
		b.win.Store(nil)
	}
	b.rampEnd.Store(0)
	if s.RampDuration > 0 && s.Mode == ModeAuto {
		now := b.now()
		b.rampStart.Store(now)
		b.rampEnd.Store(now + int64(s.RampDuration))
	}
}

func (b *Breaker) notify(tr Transition) {
	if b.onTransition != nil {
		b.onTransition(tr)
	}
}

// SetSettings applies new settings. The state and its counters are kept
// when only thresholds change; a new window shape starts an empty window;
// a change of Mode forces the state (back to closed for auto).
func (b *Breaker) SetSettings(s Settings) {
	b.mu.Lock()
	old := b.settings.Load()
	b.settings.Store(&s)
	if s.hasWindow() != old.hasWindow() || s.WindowCount != old.WindowCount || s.WindowDuration != old.WindowDuration {
		if s.hasWindow() {
			b.win.Store(newWindow(&s))
		} else {
			b.win.Store(nil)
		}
	}
	if s.Mode == old.Mode {
		b.mu.Unlock()
		return
	}
	w := b.word.Load()
	to := modeState(s.Mode)
	nw, _ := b.set(w, to)
	if to == StateClosed {
		b.resetClosed()
	}
	b.word.Store(nw)
	tr := Transition{From: stateOf(w), To: to, Reason: "state_" + modeName(s.Mode)}
	b.mu.Unlock()
	b.notify(tr)
}

func modeName(m Mode) string {
	return [...]string{"auto", "force_open", "force_closed", "disabled"}[m]
}

// Snapshot is a breaker's state as read at one moment, for the admin API.
type Snapshot struct {
	State State
	// OpenFor is the time left until half-open (state open).
	OpenFor             time.Duration
	ConsecutiveFailures int64
	// HasWindow: the breaker has rate triggers, and Calls, Failures and
	// Slow are its current window's counts.
	HasWindow             bool
	Calls, Failures, Slow int64
	HalfOpenProbes        int64 // state half_open
	Ramping               bool  // state closed
}

// Snapshot reads the breaker's state without changing it.
func (b *Breaker) Snapshot() Snapshot {
	w := b.word.Load()
	out := Snapshot{State: stateOf(w), ConsecutiveFailures: b.fails.Load()}
	switch out.State {
	case StateOpen:
		if left := b.openUntil.Load() - b.now(); left > 0 {
			out.OpenFor = time.Duration(left)
		}
	case StateHalfOpen:
		out.HalfOpenProbes = b.probes.Load()
	case StateClosed:
		out.Ramping = b.rampEnd.Load() != 0
	}
	if win := b.win.Load(); win != nil {
		out.HasWindow = true
		out.Calls, out.Failures, out.Slow = win.totals()
	}
	return out
}

// Reset moves the breaker to its mode's state with fresh counters: closed
// (without a ramp) for auto. For the admin API's reset.
func (b *Breaker) Reset() {
	b.mu.Lock()
	w := b.word.Load()
	s := b.settings.Load()
	to := modeState(s.Mode)
	nw, _ := b.set(w, to)
	b.resetClosed()
	b.rampEnd.Store(0)
	b.openUntil.Store(0)
	b.word.Store(nw)
	b.mu.Unlock()
	if from := stateOf(w); from != to {
		b.notify(Transition{From: from, To: to, Reason: "admin_reset"})
	}
}
