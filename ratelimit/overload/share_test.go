package overload

import "testing"

// settled ends c's first probe: the limit in force is the configured one
// and no probe is due.
func settled(c *Controller) {
	c.lim.probing, c.lim.nextProbe = false, 1<<62
	c.lim.newPhase(0)
	c.limitNow.Store(c.lim.current())
}

func mustAdmit(t *testing.T, c *Controller, class Class, key string, now int64) Ticket {
	t.Helper()
	tk, _, out := c.Enqueue(class, []byte(key), now)
	if out != Admitted {
		t.Fatalf("%s: %v, want admitted (in flight %d, limit %d)", key, out, c.InFlight(), c.Limit())
	}
	return tk
}

func mustQueue(t *testing.T, c *Controller, class Class, key string, now int64) *Waiter {
	t.Helper()
	_, w, out := c.Enqueue(class, []byte(key), now)
	if out != Queued {
		t.Fatalf("%s: %v, want queued (in flight %d, limit %d)", key, out, c.InFlight(), c.Limit())
	}
	return w
}

func isReady(w *Waiter) bool {
	select {
	case <-w.Ready():
		return true
	default:
		return false
	}
}

// A key whose queue stands holds its slots on loan (share.go): a request
// of a key whose queue does not stand takes a slot over the limit while
// fewer requests are over it than the standing key holds, arriving or
// waiting, and the standing key gets a slot only under the limit.
func TestStandingKeySlotsAreLent(t *testing.T) {
	c := New(fixed(2, 100), 0)
	settled(c)
	h1 := mustAdmit(t, c, Normal, "heavy", 0)
	h2 := mustAdmit(t, c, Normal, "heavy", 0)
	hw := mustQueue(t, c, Normal, "heavy", 0)
	c.Tick(150 * ms) // heavy's queue has stood 150 ms: its 2 slots are on loan
	l1 := mustAdmit(t, c, Normal, "light1", 150*ms)
	l2 := mustAdmit(t, c, Normal, "light2", 150*ms)
	if n := c.InFlight(); n != 4 {
		t.Fatalf("in flight %d, want 4: the limit of 2 plus heavy's 2", n)
	}
	lw := mustQueue(t, c, Normal, "light3", 150*ms) // 2 over the limit: all heavy holds
	c.Release(h1, -1, false, 151*ms)                // 3 in flight, 1 on loan: still full
	if lg, hg := isReady(lw), isReady(hw); lg || hg {
		t.Fatalf("light3 granted %v, heavy %v with 2 over the limit and 1 slot on loan", lg, hg)
	}
	c.Release(l1, -1, false, 152*ms) // 2 in flight, 1 on loan: light3 borrows
	if lg, hg := isReady(lw), isReady(hw); !lg || hg {
		t.Fatalf("light3 granted %v, heavy %v; want light3 only (in flight at the limit)", lg, hg)
	}
	l3, out := c.Result(lw)
	if out != Admitted || c.InFlight() != 3 {
		t.Fatalf("light3: %v, in flight %d; want admitted, 3", out, c.InFlight())
	}
	c.Release(l2, -1, false, 153*ms) // 2 in flight: heavy still waits
	if isReady(hw) {
		t.Fatal("the standing key was granted a slot with in flight at the limit")
	}
	c.Release(h2, -1, false, 154*ms) // 1 in flight: under the limit, heavy's turn
	if !isReady(hw) {
		t.Fatal("the standing key was not granted a slot under the limit")
	}
	h3, out := c.Result(hw)
	if out != Admitted {
		t.Fatalf("heavy: %v", out)
	}
	c.Release(l3, -1, false, 155*ms)
	c.Release(h3, -1, false, 156*ms)
	if n, k := c.InFlight(), len(c.keys); n != 0 || k != 0 || c.loaned != 0 {
		t.Fatalf("after all released: in flight %d, %d keys open, %d on loan", n, k, c.loaned)
	}
}

// Borrowing keeps the order of classes: a request of a less important
// class than one waiting does not take a lent slot; one as important does.
func TestBorrowingKeepsClassOrder(t *testing.T) {
	c := New(fixed(1, 100), 0)
	settled(c)
	h := mustAdmit(t, c, High, "heavy", 0)
	hw := mustQueue(t, c, High, "heavy", 0)
	c.Tick(150 * ms) // heavy's high queue stands: its slot is on loan
	lw := mustQueue(t, c, Normal, "light", 150*ms)
	lh := mustAdmit(t, c, High, "light-high", 150*ms)
	if n := c.InFlight(); n != 2 {
		t.Fatalf("in flight %d, want 2: the limit of 1 plus heavy's 1", n)
	}
	c.Release(lh, -1, false, 151*ms) // 1 in flight, at the limit; high waits
	if lg, hg := isReady(lw), isReady(hw); lg || hg {
		t.Fatalf("light (normal) granted %v, heavy %v; want neither: a high request waits and in flight is at the limit", lg, hg)
	}
	c.Release(h, -1, false, 152*ms)
	if lg, hg := isReady(lw), isReady(hw); lg || !hg {
		t.Fatalf("light (normal) granted %v, heavy (high) %v; want heavy first", lg, hg)
	}
}
