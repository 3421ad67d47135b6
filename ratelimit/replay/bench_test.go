package replay

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// BenchmarkRecord is the cost a request pays to be recorded, on 10 000
// keys: at the rate the default ring keeps whole (437 req/s, every
// request written), at 10 000 req/s (sampled: most requests cost a hash
// and a load), and from parallel callers (-cpu 2).
func BenchmarkRecord(b *testing.B) {
	keys := make([][]byte, 10000)
	for i := range keys {
		keys[i] = []byte("user:" + strconv.Itoa(i*7919))
	}
	kept := DefaultWindow / DefaultRecords
	for _, c := range []struct {
		name string
		step int64
	}{{"kept", kept}, {"sampled_10k_rps", int64(100 * time.Microsecond)}} {
		b.Run(c.name, func(b *testing.B) {
			rec := NewRecorder(DefaultWindow, DefaultRecords)
			b.ReportAllocs()
			at := t0
			cpu := processCPU()
			for i := 0; b.Loop(); i++ {
				at += c.step
				rec.Record(keys[i%len(keys)], Arrival{At: at, Cost: 1})
			}
			reportCPU(b, cpu, b.N, "cpu-ns/op")
		})
	}
	b.Run("parallel", func(b *testing.B) {
		rec := NewRecorder(DefaultWindow, DefaultRecords)
		b.ReportAllocs()
		b.ResetTimer()
		cpu := processCPU()
		defer func() { reportCPU(b, cpu, b.N, "cpu-ns/op") }()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(len(keys))
			at := t0
			for pb.Next() {
				at += kept
				rec.Record(keys[i%len(keys)], Arrival{At: at, Cost: 1})
				i++
			}
		})
	})
}

// BenchmarkReplay replays 10 minutes at 10 000 req/s on 10 000 keys
// (6 M records, a ring 24 times the default) against a rule in force
// and a tightened one, and reports ns per record: what a preview costs
// an instance.
func BenchmarkReplay(b *testing.B) {
	for _, c := range []struct {
		name string
		rate int
	}{{"default_ring", 437}, {"10k_rps", 10000}} {
		b.Run(c.name, func(b *testing.B) {
			tr := syntheticTrace(c.rate*600, 10000)
			now, prop := one(tokenBucket(2, 10)), one(tokenBucket(1, 5))
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				Replay(tr, now, prop, Options{})
			}
			reportCPU(b, cpu, b.N*tr.Len(), "cpu-ns/record")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tr.Len()), "ns/record")
			b.ReportMetric(float64(tr.Len()), "records")
		})
	}
}

// syntheticTrace is a trace of n records over ten minutes on keys keys,
// built directly (a recorder would sample it).
func syntheticTrace(n, keys int) *Trace {
	tr := &Trace{From: t0, To: t0 + DefaultWindow}
	rng := rand.New(rand.NewPCG(9, 9))
	hashes := make([]uint64, keys)
	for i := range hashes {
		hashes[i] = rng.Uint64()
	}
	step := DefaultWindow / int64(n)
	for i := range n {
		h := hashes[rng.IntN(keys)]
		s := &tr.Shards[h>>(64-3)]
		s.Records = append(s.Records, Record{At: t0 + int64(i)*step, Key: h, Cost: 1})
	}
	return tr
}

// reportCPU reports the process's CPU time since cpu per one of n, as
// unit: what it costs whatever else the machine runs.
func reportCPU(b *testing.B, cpu int64, n int, unit string) {
	if now := processCPU(); now > 0 && n > 0 {
		b.ReportMetric(float64(now-cpu)/float64(n), unit)
	}
}
