package overload

import (
	"testing"
)

func fixed(limit int64, queued int64) Config {
	return Config{MinLimit: limit, MaxLimit: limit, InitialLimit: limit, Tolerance: 0.05,
		SampleWindow: 250 * ms, MinRTTInterval: 30 * sec, MaxQueueWait: sec, MaxQueued: queued}
}

// A freed slot goes to the most important class waiting, and within a
// class to the keys in turn: a key with many waiters gets one slot per
// round, as a key with one does.
func TestQueueOrderClassesThenKeysInTurn(t *testing.T) {
	c := New(fixed(1, 100), 0)
	held, ok := c.TryAcquire()
	if !ok {
		t.Fatal("first request not admitted")
	}
	type req struct {
		name  string
		class Class
		key   string
	}
	reqs := []req{{"low-a", Low, "a"}, {"n-a1", Normal, "a"}, {"n-a2", Normal, "a"}, {"n-a3", Normal, "a"}, {"n-b1", Normal, "b"}, {"crit", Critical, "z"}, {"n-c1", Normal, "c"}}
	waiters := map[*Waiter]string{}
	for _, r := range reqs {
		_, w, out := c.Enqueue(r.class, []byte(r.key), 0)
		if out != Queued {
			t.Fatalf("%s: %v, want queued", r.name, out)
		}
		waiters[w] = r.name
	}
	var order []string
	tk := held
	for range reqs {
		c.Release(tk, -1, false, 0)
		var got *Waiter
		for w := range waiters {
			select {
			case <-w.Ready():
				got = w
			default:
			}
		}
		if got == nil {
			t.Fatalf("after %v no waiter was granted", order)
		}
		order = append(order, waiters[got])
		delete(waiters, got)
		var out Outcome
		if tk, out = c.Result(got); out != Admitted {
			t.Fatalf("%s: %v", order[len(order)-1], out)
		}
	}
	want := []string{"crit", "n-a1", "n-b1", "n-c1", "n-a2", "n-a3", "low-a"}
	if fmt := order; len(fmt) != len(want) {
		t.Fatalf("order %v", order)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

// A full queue refuses the least important waiter first: a more important
// arrival pushes out the newest waiter of the least important class, and
// within one class the key with the most waiters gives way to a key with
// fewer; an arrival that would be the victim itself is refused.
func TestQueueFullPushesOutTheLeastImportant(t *testing.T) {
	c := New(fixed(1, 3), 0)
	if _, ok := c.TryAcquire(); !ok {
		t.Fatal("not admitted")
	}
	_, low, _ := c.Enqueue(Low, []byte("a"), 0)
	_, a1, _ := c.Enqueue(Normal, []byte("a"), 0)
	_, a2, _ := c.Enqueue(Normal, []byte("a"), 0)
	// Full. A high request pushes out the low one.
	if _, _, out := c.Enqueue(High, []byte("h"), 0); out != Queued {
		t.Fatalf("high: %v", out)
	}
	select {
	case <-low.Ready():
	default:
		t.Fatal("the low waiter was not pushed out")
	}
	if _, out := c.Result(low); out != PushedOut {
		t.Fatalf("low: %v", out)
	}
	// Full with high, a, a. A normal request of key b (no waiters) pushes
	// out a's newest.
	if _, _, out := c.Enqueue(Normal, []byte("b"), 0); out != Queued {
		t.Fatalf("b: %v", out)
	}
	select {
	case <-a2.Ready():
	default:
		t.Fatal("a's newest waiter was not pushed out")
	}
	if _, out := c.Result(a2); out != PushedOut {
		t.Fatalf("a2: %v", out)
	}
	// Full with high, a, b: another of a is refused (it would be the
	// victim), and so is a sheddable one.
	if _, _, out := c.Enqueue(Normal, []byte("a"), 0); out != QueueFull {
		t.Fatalf("a again: %v, want queue_full", out)
	}
	if _, _, out := c.Enqueue(Sheddable, []byte("x"), 0); out != QueueFull {
		t.Fatalf("sheddable: %v, want queue_full", out)
	}
	// a1 times out.
	if _, out := c.Abandon(a1); out != TimedOut {
		t.Fatalf("a1: %v", out)
	}
	st := c.State()
	if st.Classes[Low].PushedOut != 1 || st.Classes[Normal].PushedOut != 1 || st.Classes[Normal].QueueFull != 1 ||
		st.Classes[Sheddable].QueueFull != 1 || st.Classes[Normal].TimedOut != 1 || st.Classes[Normal].Waiting != 1 || st.Classes[High].Waiting != 1 {
		t.Fatalf("state %+v", st.Classes)
	}
}

// A waiter granted a slot just as it gives up keeps the slot (Abandon says
// Admitted), so no slot is lost.
func TestAbandonAfterGrantKeepsTheSlot(t *testing.T) {
	c := New(fixed(1, 10), 0)
	tk, _ := c.TryAcquire()
	_, w, _ := c.Enqueue(Normal, []byte("k"), 0)
	c.Release(tk, -1, false, 0) // grants w
	tk2, out := c.Abandon(w)
	if out != Admitted || c.InFlight() != 1 {
		t.Fatalf("abandon after grant: %v, in flight %d", out, c.InFlight())
	}
	c.Release(tk2, -1, false, 0)
	if c.InFlight() != 0 || c.queued.Load() != 0 {
		t.Fatalf("in flight %d queued %d", c.InFlight(), c.queued.Load())
	}
}

func TestParseClass(t *testing.T) {
	for in, want := range map[string]Class{"critical": Critical, "HIGH": High, " low ": Low, "0": Critical, "4": Sheddable, "sheddable": Sheddable} {
		if c, ok := ParseClass(in); !ok || c != want {
			t.Errorf("%q: %v %v", in, c, ok)
		}
	}
	for _, in := range []string{"", "urgent", "5", "-1"} {
		if c, ok := ParseClass(in); ok || c != Normal {
			t.Errorf("%q: %v %v, want normal, false", in, c, ok)
		}
	}
}

// Controlled delay: a key whose queue has not emptied for standingAfter
// has its waiters older than the target refused (queue_timeout); a key
// whose queue formed just now keeps max_queue_wait.
func TestStandingKeyQueueHeldToTarget(t *testing.T) {
	c := New(fixed(1, 100), 0)
	c.lim.minRTT = 10 * ms // target: 10 ms
	tk, _ := c.TryAcquire()
	_, old1, _ := c.Enqueue(Normal, []byte("heavy"), 0)
	_, old2, _ := c.Enqueue(Normal, []byte("heavy"), 50*ms)
	_, fresh, _ := c.Enqueue(Normal, []byte("light"), 95*ms)
	// At 120 ms heavy's queue has stood 120 ms: its waiters from 0 and
	// 50 ms are past the 10 ms target; light's queue is 25 ms old.
	c.Tick(120 * ms)
	for name, w := range map[string]*Waiter{"heavy 0ms": old1, "heavy 50ms": old2} {
		select {
		case <-w.Ready():
			if _, out := c.Result(w); out != TimedOut {
				t.Fatalf("%s: %v, want queue_timeout", name, out)
			}
		default:
			t.Fatalf("%s: still waiting in a standing queue past the target", name)
		}
	}
	select {
	case <-fresh.Ready():
		t.Fatal("the light key's waiter was refused: its queue is not standing")
	default:
	}
	c.Release(tk, -1, false, 121*ms)
	if _, out := c.Result(fresh); out != Admitted {
		t.Fatalf("light: %v, want admitted", out)
	}
	if st := c.State(); st.Classes[Normal].TimedOut != 2 {
		t.Fatalf("timed out %d, want 2", st.Classes[Normal].TimedOut)
	}
}
