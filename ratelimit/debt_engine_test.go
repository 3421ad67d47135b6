package ratelimit

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore"
)

// debtRules are a settling rule of each engine with a quota of 10: a
// request reserving 1 and reporting 10, after one reporting 5, takes its
// key 5 below zero (over its quota); one more token charged, 6.
func debtRules() map[string]rulestore.Fields {
	rc := func(f rulestore.Fields) rulestore.Fields {
		f["response_cost"] = "{http.response.header.X-Tokens-Used}"
		f["reserve"] = "1"
		return f
	}
	return map[string]rulestore.Fields{
		"token_bucket":   rc(rulestore.Fields{"qps": "0.001", "burst": "10"}),
		"sliding_window": rc(rulestore.Fields{"limit_type": "sliding_window", "qps": "1", "window_size": "10"}),
		"calendar":       rc(rulestore.Fields{"quota": "10", "period": "day", "timezone": "UTC"}),
	}
}

// Each engine's charge says when it takes the key into debt (once, not
// again while it stays there), and the debt gauges read the table.
func TestSettleDebtLocalEngines(t *testing.T) {
	for typ, f := range debtRules() {
		t.Run(typ, func(t *testing.T) {
			r := mustRule(t, f)
			e := newLocalEngine(r)
			key := []byte("user:a")
			now := engineAt(time.Now())
			var debts []bool
			for _, used := range []int64{5, 10} {
				if d := e.take(r, key, now, r.Cost); !d.OK() {
					t.Fatalf("refused before any debt: %+v", d)
				}
				debts = append(debts, e.settle(r, key, now, used-r.Reserve))
			}
			debts = append(debts, e.settle(r, key, now, 1)) // deeper: not entering again
			if debts[0] || !debts[1] || debts[2] {
				t.Errorf("debt entered %v, want [false true false]", debts)
			}
			if keys, owed := e.debt(r, now); keys != 1 || owed < 5.99 || owed > 6.01 {
				t.Errorf("debt: %d keys owing %v, want 1 owing 6", keys, owed)
			}
		})
	}
}

// The cluster settle scripts answer whether the charge took the key into
// debt, for each engine.
func TestSettleDebtClusterEngines(t *testing.T) {
	srv := redistest.Start(t)
	be := &testBackend{c: newTestClient(t, srv.Addr), instances: 1}
	for typ, f := range debtRules() {
		t.Run(typ, func(t *testing.T) {
			r := clusterRule(t, f)
			l := instance(t, be, "debt-"+typ)
			e := l.engine(r).(*clusterEngine)
			key := []byte("user:a")
			var debts []bool
			for _, used := range []int64{5, 10} {
				if d := e.take(r, key, l.now(), r.Cost); !d.OK() || d.Unknown {
					t.Fatalf("refused before any debt: %+v", d)
				}
				applied, debt := e.settle(r, key, l.now(), used-r.Reserve)
				if !applied {
					t.Fatal("settlement not applied")
				}
				debts = append(debts, debt)
			}
			_, again := e.settle(r, key, l.now(), 1)
			if debts[0] || !debts[1] || again {
				t.Errorf("debt entered %v then %v, want [false true] then false", debts, again)
			}
		})
	}
}

// A cluster token bucket is charged as of the key's last decision, as the
// local engine charges it: the state's time stays the decision's, and the
// refill since then is not added before the charge.
func TestSettleClusterTokenBucketAsOfTheDecision(t *testing.T) {
	srv := redistest.Start(t)
	c := newTestClient(t, srv.Addr)
	be := &testBackend{c: c, instances: 1}
	r := clusterRule(t, rulestore.Fields{"qps": "1", "burst": "10",
		"response_cost": "{http.response.header.X-Tokens-Used}", "reserve": "1", "max_cost": "10"})
	l := instance(t, be, "settle-as-of")
	e := l.engine(r).(*clusterEngine)
	key := []byte("user:a")
	if d := e.take(r, key, l.now(), r.Cost); !d.OK() || d.Unknown {
		t.Fatalf("first request refused: %+v", d)
	}
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*ratelimit:tb2*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the key's state in Redis: %v, %v", keys, err)
	}
	// The decision moved 10 s into the past: 9 tokens then.
	v, err := c.Get(ctx, keys[0]).Bytes()
	if err != nil || len(v) != 16 {
		t.Fatalf("state %q, %v", v, err)
	}
	last := math.Float64frombits(binary.LittleEndian.Uint64(v[:8])) - 10e6
	binary.LittleEndian.PutUint64(v[:8], math.Float64bits(last))
	if err := c.Set(ctx, keys[0], v, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if applied, _ := e.settle(r, key, l.now(), 4); !applied {
		t.Fatal("settlement not applied")
	}
	v, err = c.Get(ctx, keys[0]).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	at := math.Float64frombits(binary.LittleEndian.Uint64(v[:8]))
	tokens := math.Float64frombits(binary.LittleEndian.Uint64(v[8:]))
	if at != last || tokens != 5 {
		t.Fatalf("after a charge of 4 on 9 tokens at the decision: %v tokens at %v µs, want 5 at the decision's %v (refilled first, it would be 6 now)", tokens, at, last)
	}
}
