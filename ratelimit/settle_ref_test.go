package ratelimit

import (
	"testing"

	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
)

// A token bucket's settlement on the admitted entry reads no clock: the
// cost is spent as of the key's last decision, as if it had been known
// then. A key that stays under its limit is charged exactly; only refill
// that the full bucket would have thrown away pays part of the charge.
func TestSettleTokenBucketAsOfTheDecision(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "1", "burst": "10",
		"response_cost": "{http.response.header.X-Cost}", "reserve": "1", "max_cost": "10"})
	const t0 = int64(1e9)
	noClock := func() int64 { t.Fatal("the settlement read the clock"); return 0 }
	e := newLocalEngine(r)
	d := e.take(r, []byte("alice"), t0, r.Cost) // full 10, reserve 1: 9 left
	if debt, _ := e.settleAt(r, []byte("alice"), engine.RefOf(&d), noClock, 6); debt {
		t.Fatal("a charge of 6 on 9 tokens: debt")
	}
	// 3 tokens at t0; 2 s later 5 are back, and the next request spends 1.
	if got := e.take(r, []byte("alice"), t0+2e9, r.Cost).Remaining; got != 4 {
		t.Fatalf("2 s after a cost of 7: %d left, want 4", got)
	}
	// A refund as of t0 ends where a refund 2 s later would: at burst.
	d = e.take(r, []byte("bob"), t0, r.Cost)
	e.settleAt(r, []byte("bob"), engine.RefOf(&d), noClock, -1)
	if got := e.take(r, []byte("bob"), t0+2e9, r.Cost).Remaining; got != 9 {
		t.Fatalf("bob, refunded, 2 s later: %d left, want 9", got)
	}
	// Into debt: 10 more on 9 tokens owes 1 as of t0, repaid by t0+1 s.
	d = e.take(r, []byte("carol"), t0, r.Cost)
	if debt, _ := e.settleAt(r, []byte("carol"), engine.RefOf(&d), noClock, 10); !debt {
		t.Fatal("a charge of 10 on 9 tokens: no debt reported")
	}
	if got := e.take(r, []byte("carol"), t0+1e9, r.Cost); got.OK() {
		t.Fatalf("carol 1 s after owing 1: admitted (%d left), want refused until the debt is paid and a token is back", got.Remaining)
	}
	if got := e.take(r, []byte("carol"), t0+2e9, r.Cost); !got.OK() || got.Remaining != 0 {
		t.Fatalf("carol 2 s after owing 1: %+v, want admitted with 0 left", got)
	}
}
