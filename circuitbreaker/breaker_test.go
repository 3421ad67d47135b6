package circuitbreaker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() int64          { return c.t.Load() }
func (c *fakeClock) add(d time.Duration) { c.t.Add(int64(d)) }
func newClock() *fakeClock               { c := new(fakeClock); c.t.Store(int64(time.Hour)); return c }
func defaults() Settings {
	return Settings{FailureThreshold: 3, SuccessThreshold: 2, OpenDuration: 10 * time.Second, HalfOpenRequests: 1}
}
func (r *recorder) add(tr Transition) { r.mu.Lock(); r.trs = append(r.trs, tr); r.mu.Unlock() }
func (r *recorder) list() []Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Transition(nil), r.trs...)
}
func newTestBreaker(s Settings) (*Breaker, *fakeClock, *recorder) {
	c, r := newClock(), new(recorder)
	return NewBreaker(s, c.now, r.add), c, r
}

type recorder struct {
	mu  sync.Mutex
	trs []Transition
}

// call runs one admitted call with outcome o; it fails the test if refused.
func call(t *testing.T, b *Breaker, o Outcome, slow bool) {
	t.Helper()
	tk, ok, _ := b.Allow()
	if !ok {
		t.Fatalf("call refused in state %v", b.State())
	}
	b.Record(tk, o, slow)
}

func wantState(t *testing.T, b *Breaker, s State) {
	t.Helper()
	if got := b.State(); got != s {
		t.Fatalf("state = %v, want %v", got, s)
	}
}

func TestConsecutiveFailuresTripAtThreshold(t *testing.T) {
	b, _, r := newTestBreaker(defaults())
	call(t, b, Failure, false)
	call(t, b, Failure, false)
	call(t, b, Success, false) // resets the run
	call(t, b, Failure, false)
	call(t, b, Failure, false)
	wantState(t, b, StateClosed)
	call(t, b, Failure, false)
	wantState(t, b, StateOpen)
	trs := r.list()
	if len(trs) != 1 || trs[0].To != StateOpen || trs[0].Reason != "consecutive_failures" || trs[0].OpenFor != 10*time.Second {
		t.Fatalf("transitions = %+v", trs)
	}
}

func TestOpenRejectsWithRetryAfterThenHalfOpens(t *testing.T) {
	b, c, r := newTestBreaker(defaults())
	for range 3 {
		call(t, b, Failure, false)
	}
	c.add(4 * time.Second)
	if _, ok, ra := b.Allow(); ok || ra != 6*time.Second {
		t.Fatalf("Allow while open = %v, retry after %v; want refused, 6s", ok, ra)
	}
	if !b.IsOpen() {
		t.Fatal("IsOpen = false while open")
	}
	c.add(6 * time.Second)
	if b.IsOpen() {
		t.Fatal("IsOpen = true after the open time")
	}
	tk, ok, _ := b.Allow()
	if !ok {
		t.Fatal("first probe refused")
	}
	wantState(t, b, StateHalfOpen)
	if _, ok, ra := b.Allow(); ok || ra != time.Second {
		t.Fatalf("second probe admitted (%v, %v) with half_open_requests 1", ok, ra)
	}
	b.Record(tk, Success, false)
	call(t, b, Success, false)
	wantState(t, b, StateClosed)
	var got []State
	for _, tr := range r.list() {
		got = append(got, tr.To)
	}
	if len(got) != 3 || got[0] != StateOpen || got[1] != StateHalfOpen || got[2] != StateClosed {
		t.Fatalf("transitions to %v", got)
	}
}

func TestHalfOpenProbeLimitAndFailureReopensWithGrowth(t *testing.T) {
	s := defaults()
	s.HalfOpenRequests = 3
	s.MaxOpenDuration = 25 * time.Second
	b, c, r := newTestBreaker(s)
	for range 3 {
		call(t, b, Failure, false)
	}
	c.add(10 * time.Second)
	var tks []Ticket
	for range 3 {
		tk, ok, _ := b.Allow()
		if !ok {
			t.Fatal("probe refused below the limit")
		}
		tks = append(tks, tk)
	}
	if _, ok, _ := b.Allow(); ok {
		t.Fatal("fourth probe admitted")
	}
	b.Record(tks[0], Ignored, false) // frees a slot, counts nothing
	tk, ok, _ := b.Allow()
	if !ok {
		t.Fatal("slot not freed by an ignored probe")
	}
	b.Record(tk, Failure, false)
	wantState(t, b, StateOpen)
	// Late probes of the old half-open period change nothing.
	b.Record(tks[1], Success, false)
	b.Record(tks[2], Success, false)
	wantState(t, b, StateOpen)

	want := []time.Duration{10 * time.Second, 20 * time.Second, 25 * time.Second, 25 * time.Second}
	for i, d := range want[1:] {
		trs := r.list()
		last := trs[len(trs)-1]
		if last.To != StateOpen || last.OpenFor != d {
			t.Fatalf("trip %d: %+v, want open for %v", i+2, last, d)
		}
		c.add(d)
		call2 := func() {
			tk, ok, _ := b.Allow()
			if ok {
				b.Record(tk, Failure, false)
			}
		}
		call2()
	}
	// A close resets the growth.
	c.add(25 * time.Second)
	call(t, b, Success, false)
	call(t, b, Success, false)
	wantState(t, b, StateClosed)
	for range 3 {
		call(t, b, Failure, false)
	}
	trs := r.list()
	if last := trs[len(trs)-1]; last.OpenFor != 10*time.Second {
		t.Fatalf("open time after a close = %v, want 10s", last.OpenFor)
	}
}

func TestFailureRateCountWindowRespectsMinRequests(t *testing.T) {
	s := defaults()
	s.FailureThreshold = 0
	s.WindowCount = 10
	s.FailureRate = 50
	s.MinRequests = 6
	b, _, _ := newTestBreaker(s)
	// 5 calls, 4 failures: 80% but under min_requests.
	for _, o := range []Outcome{Failure, Failure, Failure, Failure, Success} {
		call(t, b, o, false)
	}
	wantState(t, b, StateClosed)
	call(t, b, Success, false) // 6 calls, 4 failures = 66%
	wantState(t, b, StateOpen)
}

func TestFailureRateCountWindowSlides(t *testing.T) {
	s := defaults()
	s.FailureThreshold = 0
	s.WindowCount = 4
	s.FailureRate = 50
	s.MinRequests = 4
	b, _, _ := newTestBreaker(s)
	for _, o := range []Outcome{Failure, Success, Success, Success, Success, Success} {
		call(t, b, o, false) // the failure slides out
	}
	call(t, b, Failure, false) // window: S S S F = 25%
	wantState(t, b, StateClosed)
	call(t, b, Failure, false) // S S F F = 50%
	wantState(t, b, StateOpen)
}

func TestFailureRateTimeWindowForgetsOldCalls(t *testing.T) {
	s := defaults()
	s.FailureThreshold = 0
	s.WindowDuration = 10 * time.Second
	s.FailureRate = 50
	s.MinRequests = 4
	b, c, _ := newTestBreaker(s)
	call(t, b, Failure, false)
	call(t, b, Failure, false)
	call(t, b, Failure, false)
	c.add(11 * time.Second) // those fall out of the window
	call(t, b, Success, false)
	call(t, b, Success, false)
	call(t, b, Failure, false)
	wantState(t, b, StateClosed)
	call(t, b, Failure, false) // 4 calls, 2 failures
	wantState(t, b, StateOpen)
}

func TestSlowCallRate(t *testing.T) {
	s := defaults()
	s.FailureThreshold = 0
	s.WindowCount = 5
	s.SlowCallRate = 60
	s.MinRequests = 5
	b, c, _ := newTestBreaker(s)
	call(t, b, Success, true)
	call(t, b, Success, true)
	call(t, b, Success, false)
	call(t, b, Success, false)
	wantState(t, b, StateClosed)
	call(t, b, Success, true) // 3 of 5 slow
	wantState(t, b, StateOpen)
	// In half-open, a slow probe reopens when the slow-call trigger is on.
	c.add(10 * time.Second)
	call(t, b, Success, true)
	wantState(t, b, StateOpen)
}

func TestStaleOutcomesIgnored(t *testing.T) {
	b, c, _ := newTestBreaker(defaults())
	old, _, _ := b.Allow() // admitted while closed
	for range 3 {
		call(t, b, Failure, false)
	}
	c.add(10 * time.Second)
	call(t, b, Success, false)
	call(t, b, Success, false)
	wantState(t, b, StateClosed)
	b.Record(old, Failure, false) // from the previous closed period
	b.Record(old, Failure, false)
	call(t, b, Failure, false)
	call(t, b, Failure, false)
	wantState(t, b, StateClosed) // only 2 counted
}

func TestObserveCountsWithoutTicket(t *testing.T) {
	b, c, _ := newTestBreaker(defaults())
	for range 3 {
		b.Observe(Failure, false)
	}
	wantState(t, b, StateOpen)
	b.Observe(Success, false) // open: ignored
	c.add(10 * time.Second)
	tk, _, _ := b.Allow()
	b.Observe(Success, false)
	b.Record(tk, Success, false)
	wantState(t, b, StateClosed)
}

func TestRampAdmitsRisingShare(t *testing.T) {
	s := defaults()
	s.RampDuration = 10 * time.Second
	s.SuccessThreshold = 1
	b, c, _ := newTestBreaker(s)
	var roll float64
	b.rand = func() float64 { return roll }
	for range 3 {
		call(t, b, Failure, false)
	}
	c.add(10 * time.Second)
	call(t, b, Success, false)
	wantState(t, b, StateClosed)
	roll = 0.05 // under the 10% floor
	if _, ok, _ := b.Allow(); !ok {
		t.Fatal("ramp refused a roll under the floor")
	}
	roll = 0.5
	if _, ok, ra := b.Allow(); ok || ra != time.Second {
		t.Fatal("ramp admitted 50% at its start")
	}
	c.add(5 * time.Second) // share = 0.1 + 0.9*0.5 = 55%
	if _, ok, _ := b.Allow(); !ok {
		t.Fatal("ramp refused 50% half way")
	}
	roll = 0.99
	if _, ok, _ := b.Allow(); ok {
		t.Fatal("ramp admitted 99% half way")
	}
	c.add(5 * time.Second)
	if _, ok, _ := b.Allow(); !ok {
		t.Fatal("ramp still refusing after ramp_duration")
	}
	if b.rampEnd.Load() != 0 {
		t.Fatal("ramp not ended")
	}
}

func TestForcedStates(t *testing.T) {
	b, c, r := newTestBreaker(defaults())
	s := defaults()
	s.Mode = ModeForceOpen
	b.SetSettings(s)
	if _, ok, ra := b.Allow(); ok || ra != 0 || !b.IsOpen() {
		t.Fatal("force_open admitted")
	}
	c.add(time.Hour)
	if _, ok, _ := b.Allow(); ok {
		t.Fatal("force_open admitted after a long time")
	}
	s.Mode = ModeForceClosed
	b.SetSettings(s)
	for range 10 {
		call(t, b, Failure, false)
	}
	wantState(t, b, StateForcedClosed)
	s.Mode = ModeAuto
	b.SetSettings(s)
	wantState(t, b, StateClosed)
	call(t, b, Failure, false)
	call(t, b, Failure, false)
	wantState(t, b, StateClosed) // failures under force_closed are not carried over
	var got []State
	for _, tr := range r.list() {
		got = append(got, tr.To)
	}
	if len(got) != 3 || got[0] != StateForcedOpen || got[1] != StateForcedClosed || got[2] != StateClosed {
		t.Fatalf("transitions to %v", got)
	}
}

func TestThresholdChangeKeepsState(t *testing.T) {
	b, _, _ := newTestBreaker(defaults())
	call(t, b, Failure, false)
	call(t, b, Failure, false)
	s := defaults()
	s.FailureThreshold = 5
	b.SetSettings(s)
	call(t, b, Failure, false)
	call(t, b, Failure, false)
	wantState(t, b, StateClosed)
	call(t, b, Failure, false) // fifth consecutive failure, counted across the change
	wantState(t, b, StateOpen)
	s.OpenDuration = time.Minute
	b.SetSettings(s)
	wantState(t, b, StateOpen)
}

func TestOpenDurationGrowthCap(t *testing.T) {
	s := Settings{OpenDuration: time.Second, MaxOpenDuration: 5 * time.Second}
	for trips, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 60: 5 * time.Second} {
		if got := openTime(&s, trips); got != want {
			t.Errorf("openTime(trip %d) = %v, want %v", trips, got, want)
		}
	}
	s.MaxOpenDuration = 0
	if got := openTime(&s, 5); got != time.Second {
		t.Errorf("without max_open_duration the open time grew to %v", got)
	}
}

// TestConcurrentTripsOnce hammers a breaker from many goroutines: it must
// trip exactly once and stay consistent (run with -race).
func TestConcurrentTripsOnce(t *testing.T) {
	s := defaults()
	s.FailureThreshold = 50
	s.WindowCount = 100
	s.FailureRate = 90
	s.MinRequests = 100
	b, _, r := newTestBreaker(s)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if tk, ok, _ := b.Allow(); ok {
					b.Record(tk, Failure, false)
				}
			}
		}()
	}
	wg.Wait()
	wantState(t, b, StateOpen)
	if n := len(r.list()); n != 1 {
		t.Fatalf("%d transitions, want 1", n)
	}
}

func TestConcurrentHalfOpenProbes(t *testing.T) {
	s := defaults()
	s.HalfOpenRequests = 4
	s.SuccessThreshold = 1000
	b, c, _ := newTestBreaker(s)
	for range 3 {
		call(t, b, Failure, false)
	}
	c.add(10 * time.Second)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, _ := b.Allow(); ok {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 4 {
		t.Fatalf("%d probes admitted, want 4", n)
	}
}

// A probe still running when the breaker reopens keeps its slot into the
// next half-open period: the downstream never sees more than
// HalfOpenRequests calls at once while the breaker is not closed.
func TestLateProbeKeepsItsSlot(t *testing.T) {
	s := defaults()
	s.HalfOpenRequests = 2
	b, c, _ := newTestBreaker(s)
	for range 3 {
		call(t, b, Failure, false)
	}
	c.add(10 * time.Second)
	slow, _, _ := b.Allow()
	call(t, b, Failure, false) // the other probe fails: open again
	wantState(t, b, StateOpen)
	c.add(10 * time.Second)
	if _, ok, _ := b.Allow(); !ok {
		t.Fatal("no probe admitted")
	}
	if _, ok, _ := b.Allow(); ok {
		t.Fatal("admitted a second probe while the late one still runs")
	}
	b.Record(slow, Success, false) // ends: outcome dropped, slot freed
	wantState(t, b, StateHalfOpen)
	if _, ok, _ := b.Allow(); !ok {
		t.Fatal("slot not freed by the late probe")
	}
}
