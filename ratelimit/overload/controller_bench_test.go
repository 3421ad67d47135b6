package overload

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkContended is a request's way through a controller whose limit
// (1) is full most of the time: 8 goroutines per CPU over 64 keys take a
// slot at once when they can, else wait in the queue, hold it while the
// scheduler runs another goroutine, and give it back. It measures the
// queue's lock and the hand-over of slots between goroutines.
func BenchmarkContended(b *testing.B) {
	cfg := fixed(1, 100_000)
	cfg.MaxQueueWait = 1 << 62
	c := New(cfg, 0)
	settled(c)
	var clock, next atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := []byte("key-" + strconv.FormatInt(next.Add(1)%64, 10))
		for pb.Next() {
			now := clock.Add(1000)
			t, ok := c.TryAcquire()
			if !ok {
				var w *Waiter
				var out Outcome
				if t, w, out = c.Enqueue(Normal, key, now); out == Queued {
					<-w.Ready()
					t, out = c.Result(w)
				}
				if out != Admitted {
					continue
				}
			}
			runtime.Gosched()
			c.Release(t, 1000, false, clock.Add(1000))
		}
	})
}
