package ratelimit

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
)

// countedFields is a local settling rule; withType is it of another limit
// type, which the limiter serves with a new engine.
var countedFields = rulestore.Fields{"qps": "1000", "key_resolver": "userId",
	"response_cost": "{http.response.header.X-Cost}", "reserve": "1", "max_cost": "10"}

func withType(f rulestore.Fields, typ string) rulestore.Fields {
	g := maps.Clone(f)
	g["limit_type"] = typ
	return g
}

// Settlements at a local rule's entries are counted in the table's shards
// and, once the engine is replaced, in the limiter's counters: one counted
// before the replacement still shows after it, one of a request admitted
// by the old engine and settled after the replacement counts once, as do
// those on the new engine.
func TestSettlementsCountedAcrossEngineReplacement(t *testing.T) {
	const now = int64(1e9)
	lim := newLimiter("t", func() int64 { return now })
	t.Cleanup(func() { lim.Destruct() })
	want := func(step string, charged, refunded uint64) {
		t.Helper()
		if c, r := lim.settledTokens(); c != charged || r != refunded {
			t.Fatalf("%s: charged %d, refunded %d; want %d, %d", step, c, r, charged, refunded)
		}
	}
	key := []byte("alice")
	r1 := mustRule(t, countedFields)
	old := lim.engine(r1)
	d1 := decide(old, r1, key, now, r1.Cost)
	d2 := decide(old, r1, key, now, r1.Cost) // settled after the replacement
	settleResponse(r1, lim, old, key, engine.RefOf(&d1), 3)
	want("on the first engine", 3, 0)

	r2 := mustRule(t, withType(countedFields, "sliding_window"))
	cur := lim.engine(r2)
	if cur == old {
		t.Fatal("the limiter kept its engine for another limit type")
	}
	want("after the replacement", 3, 0)
	settleResponse(r1, lim, old, key, engine.RefOf(&d2), -1)
	want("a request of the old engine settled after it", 3, 1)
	d3 := decide(cur, r2, key, now, r2.Cost)
	settleResponse(r2, lim, cur, key, engine.RefOf(&d3), 5)
	want("on the new engine", 8, 1)
}

// Settlements running while the metrics are read and the engine is
// replaced are each counted once, and a reading never goes down.
func TestSettlementCountsMonotonicUnderReplacement(t *testing.T) {
	lim := newLimiter("t", nil)
	t.Cleanup(func() { lim.Destruct() })
	rules := []*Rule{mustRule(t, countedFields), mustRule(t, withType(countedFields, "sliding_window"))}
	const workers, perWorker = 4, 2000
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				r := rules[(i/500)%len(rules)] // the rule changes as a reload does
				eng := lim.engine(r)
				key := []byte(fmt.Sprintf("user:%d:%d", w, i%50))
				if d := decide(eng, r, key, lim.now(), r.Cost); d.OK() {
					admitted.Add(1)
					settleResponse(r, lim, eng, key, engine.RefOf(&d), 2)
					settleResponse(r, lim, eng, key, engine.RefOf(&d), -1)
				}
			}
		}()
	}
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		var lastC, lastR uint64
		for {
			c, r := lim.settledTokens()
			if c < lastC || r < lastR {
				readErr <- fmt.Errorf("counts went down: charged %d -> %d, refunded %d -> %d", lastC, c, lastR, r)
				return
			}
			lastC, lastR = c, r
			select {
			case <-stop:
				readErr <- nil
				return
			default:
			}
		}
	}()
	wg.Wait()
	close(stop)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	n := uint64(admitted.Load())
	if n == 0 {
		t.Fatal("no request admitted")
	}
	if c, r := lim.settledTokens(); c != 2*n || r != n {
		t.Fatalf("charged %d, refunded %d; want %d, %d (%d requests admitted)", c, r, 2*n, n, n)
	}
}
