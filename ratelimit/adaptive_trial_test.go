package ratelimit

import "testing"

// A raise of the limit that meets a queue is undone by the next window,
// without the second window a cut otherwise waits for. At C = 5 (200 ms,
// the example's case after its capacity halved) a steady window at 6
// showing no queue raises the limit to 7; the window at 7 then reads
// 1.4 minRTT, the queue of two that 7 in flight make in front of 5
// workers. Before, one window over the tolerance held the limit (it could
// be a stall of the gateway), so 7 (1.4 C) stayed at least two windows
// more, and in the simulation a 2 s span read up to 1.5 C. A raise whose
// next two windows read no queue passes its trial (trialWindows): a later
// window over the tolerance waits for confirmation as before.
func TestGradientRaiseMetByAQueueIsUndone(t *testing.T) {
	g, windowOf := settledAt(t, 6) // the window before under the probe share
	window := func(limit int64, factor float64) { t.Helper(); windowOf(12, factor, limit) }
	window(6, 1.0)
	if got := g.Limit(); got != 7 {
		t.Fatalf("after a steady window at 1.0 minRTT: limit %d, want 7 (raised by the headroom)", got)
	}
	window(7, 1.4)
	if got := g.Limit(); got != 6 {
		t.Fatalf("after the raise met 1.4 minRTT: limit %d, want 6 (the raise undone)", got)
	}

	// One window under the probe share at the raised limit does not pass
	// the trial: its first answers met the queue of the limit before, and
	// a dozen of them read 1.2 minRTT as 1.1 often enough.
	g.est, g.lastR = 6, 1.05
	g.limit.Store(6)
	window(6, 1.0)
	window(7, 1.1)
	window(7, 1.4)
	if got := g.Limit(); got != 6 {
		t.Fatalf("a raise to 7 after one window at 1.1 minRTT, then a window at 1.4: limit %d, want 6 (the raise undone)", got)
	}

	// A raise that passed its trial (two windows under the probe share):
	// one window over the tolerance holds.
	g.est, g.lastR = 6, 1.05
	g.limit.Store(6)
	window(6, 1.0)
	window(7, 1.1)
	window(7, 1.1) // the raise passed (and grew the estimate, not the limit)
	if got := g.Limit(); got != 7 {
		t.Fatalf("after the raise to 7 read 1.1 minRTT twice: limit %d, want 7", got)
	}
	window(7, 1.4)
	if got := g.Limit(); got != 7 {
		t.Errorf("one window at 1.4 minRTT after a raise that passed its trial: limit %d, want 7 held (a stall is over by the next window)", got)
	}
}
