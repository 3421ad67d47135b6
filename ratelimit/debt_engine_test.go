package ratelimit

import (
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
