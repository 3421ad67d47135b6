package ratelimit

import (
	"math/rand"
	"testing"
)

// A fresh controller in front of a healthy upstream (200 ms, 60
// closed-loop clients, the example's min_limit 4 and initial_limit 8)
// measures its first minRTT from the requests it admits at initial_limit
// and meets the demand after one round trip. Before, the first minRTT was
// a probe at min_limit (25 requests, six round trips with 56 of the 60
// clients refused), then slow start doubled from 8 per round trip: about a
// quarter of the first 8 s refused.
func TestGradientStartUpRefusesLittle(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 500 * ms, MinRTTInterval: 30 * sec}
	const clients, lat, dur = 60, 200 * ms, 8 * sec
	g := newGradient(cfg, sec)
	refused, _ := runClosedLoop(g, rand.New(rand.NewSource(1)), clients, lat, sec, dur)
	// Each client sends about dur/lat requests; one round trip of
	// refusals (52 clients) is about 2 % of them.
	sent := clients * dur / lat
	if share := float64(refused) / float64(sent); share > 0.03 {
		t.Fatalf("healthy upstream, fresh start: %d refused of about %d (%.1f %%), want at most 3 %% (%+v)", refused, sent, 100*share, g.state())
	}
	if st := g.state(); st.Limit < clients || st.MinRTT < 0.195 || st.MinRTT > 0.206 {
		t.Fatalf("after %v: %+v, want the limit at the demand (%d) or above and minRTT about 200 ms", dur, st, clients)
	}
}

// The first minRTT counts the requests admitted before its first answer,
// all of them, and no later ones: the clients of the fast first answers
// send again at once, and their second answers can come before the first
// requests' slow ones. Counted as the first limit's worth to finish, those
// fast ones read minRTT low.
func TestGradientFirstMinRTTCountsTheFirstRequests(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 500 * ms, MinRTTInterval: 30 * sec}
	g := newGradient(cfg, sec)
	if l := g.Limit(); l != 8 {
		t.Fatalf("fresh: limit %d, want initial_limit 8", l)
	}
	// Eight admitted at 1 s: four answered at 100 ms, four at 300 ms.
	// The four fast clients send again at once (100 ms each).
	for i := int64(0); i < 4; i++ {
		g.observe(sec, sec+100*ms+i, 8, false)
	}
	for i := int64(0); i < 4; i++ {
		g.observe(sec+100*ms+i, sec+200*ms+i, 8, false)
	}
	for i := int64(0); i < 4; i++ {
		g.observe(sec, sec+300*ms+i, 8, false)
	}
	if st := g.state(); st.Measuring || st.MinRTT < 0.199 || st.MinRTT > 0.201 {
		t.Fatalf("after the first eight answers (4 × 100 ms, 4 × 300 ms): %+v, want minRTT 200 ms, measured", st)
	}
}

// Slow start's first round trip can take the limit far above a capacity
// that lies between initial_limit and the demand (here 8 → 64 against 10
// workers). The requests admitted after that jump come back only once the
// queue ahead of them drained, more than a second later, and the first
// window to see them over the tolerance cannot cut (one such window may be
// a stall of the gateway) but takes the jump back to twice the limit
// before it, and the next window still counts them, so the cut comes a
// sample window later. Before, a window that held the limit in
// slow start also restarted its count from requests admitted after it,
// which waited behind the same queue: the cut came after two drains, and
// in front of the example's service in flight stayed at about 2 C into
// the measured half of its first phase.
func TestGradientSlowStartJumpIntoAQueueIsCutSoon(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 250 * ms, MinRTTInterval: 30 * sec}
	g := newGradient(cfg, sec)
	for i := 0; i < 52; i++ { // the demand beyond initial_limit, refused
		g.refuse()
	}
	now := answerFirstProbe(g, sec, 200*ms, 8)
	if l := g.Limit(); l != 64 {
		t.Fatalf("after the first round trip with 52 refused: limit %d, want 64 (8 times initial_limit)", l)
	}
	up := &simUpstream{capacity: 10, base: 200 * ms}
	_, _, now = runGradient(g, up, now, 2*sec)
	if l := g.Limit(); l > 20 {
		t.Fatalf("2 s after the jump into a capacity of 10: limit %d (%+v), want the jump cut (<= 2 C)", l, g.state())
	}
}

// A first minRTT of fewer samples than a probe's (initial_limit 8: 8
// samples, ± 11 % at a coefficient of variation of 0.3) is measured again
// after 10 sample windows, not after min_rtt_interval: at 2 s service
// times (min_rtt_interval 300 s) it was kept for the whole run, and in
// flight after a capacity halving followed its error (up to 1.59 C).
func TestGradientFirstMinRTTOfFewSamplesIsMeasuredAgainSoon(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 100 * ms, MinRTTInterval: 300 * sec}
	g := newGradient(cfg, sec)
	now := answerFirstProbe(g, sec, 20*ms, 8)
	if g.state().Measuring {
		t.Fatalf("after the first probe: %+v", g.state())
	}
	g.slowStart = false
	// Windows at minRTT with the limit full: the re-measure comes due
	// after 10 windows (1 s), far before min_rtt_interval.
	measuring := false
	for end := now + 2*sec; now < end && !measuring; now += ms {
		g.observe(now-20*ms, now, g.Limit(), false)
		measuring = g.state().Measuring
	}
	if !measuring {
		t.Fatalf("2 s after a first minRTT of 8 samples: %+v, want measuring again", g.state())
	}
}

// The first round trip's waiters (adaptive_firstround.go): up to what slow
// start's first step can admit (initial_limit 8: the step goes at most to
// 64, so 56 wait), the step is sized by them (they count as refused), and
// once it is taken nobody waits.
func TestGradientFirstRoundWaitersAreBoundedAndWokenByTheStep(t *testing.T) {
	cfg := AdaptiveConfig{MinLimit: 4, MaxLimit: 200, InitialLimit: 8, Tolerance: 0.25,
		SampleWindow: 500 * ms, MinRTTInterval: 30 * sec}
	g := newGradient(cfg, sec)
	var step <-chan struct{}
	for i := 0; i < 56; i++ {
		g.refuse()
		s, wait, ok := g.firstRoundWait()
		if !ok || wait != cfg.SampleWindow {
			t.Fatalf("waiter %d: ok %v, wait %v; want to wait up to sample_window", i+1, ok, wait)
		}
		step = s
	}
	g.refuse()
	if _, _, ok := g.firstRoundWait(); ok {
		t.Fatal("waiter 57: may wait; want refused (the step admits at most 56 more)")
	}
	if st := g.state(); st.Waiting != 56 {
		t.Fatalf("state: %+v, want 56 waiting", st)
	}
	answerFirstProbe(g, sec, 200*ms, 8)
	select {
	case <-step:
	default:
		t.Fatal("the first step was taken and the waiters not woken")
	}
	if l := g.Limit(); l != 64 {
		t.Fatalf("after the first round trip with 57 refused: limit %d, want 64", l)
	}
	if _, _, ok := g.firstRoundWait(); ok {
		t.Fatal("after the first step a request may still wait")
	}
	for i := 0; i < 56; i++ {
		g.doneWaiting()
	}
	if st := g.state(); st.Waiting != 0 {
		t.Fatalf("state after the waiters left: %+v", st)
	}
}
