package ratelimit

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkRecordStep is the pipeline's record step alone (record.go) for
// one rule over 10,000 keys: kept, at a rate the default ring holds for
// its window unsampled (every request written), and sampled, at 10,000
// req/s (most requests skipped). The goal is ≤ 50 ns and no allocation
// per request; cpu-ns/op is steadier than ns/op on a shared machine.
func BenchmarkRecordStep(b *testing.B) {
	f := rulestore.Fields{"qps": "1e9", "key_resolver": "userId"}
	r, err := ParseRule(InlineID(f), f)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([][]byte, 10_000)
	for i := range keys {
		keys[i] = []byte("user-" + strconv.Itoa(i))
	}
	for _, c := range []struct {
		name string
		gap  time.Duration // between requests
	}{{"kept", 3 * time.Millisecond}, {"sampled", 100 * time.Microsecond}} {
		b.Run(c.name, func(b *testing.B) {
			lim := newLimiter(r.ID, nil)
			defer lim.Destruct()
			lim.recorder()
			ts := []taken{{m: member{rule: r, lim: lim}, decided: true, admitted: true, cost: 1}}
			at := lim.now()
			b.ReportAllocs()
			cpu := reportCPU(b)
			for i := 0; b.Loop(); i++ {
				kb := keys[i%len(keys)]
				at += int64(c.gap)
				ts[0].kto, ts[0].d.At = len(kb), at
				record(ts, kb)
			}
			cpu()
			if lim.rec.Load().Snapshot(at).Len() == 0 {
				b.Fatal("nothing recorded: the benchmark measures a skipped step")
			}
		})
	}
}
