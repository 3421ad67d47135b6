package cluster_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/ratelimit/nested"
)

// BenchmarkNestedSpendBatched is a spend along a path of one and of three
// levels (key → team → org, guarantees set, none refusing) through the
// batcher against a real Redis, from parallel callers over 10,000 keys:
// the time per decision, with its one script call, as the handler pays it.
func BenchmarkNestedSpendBatched(b *testing.B) {
	rd := redistest.Start(b)
	bt := cluster.NewBatcher(rd.Client())
	big := &nested.Limit{QPS: 1e9, Burst: 1e9}
	for _, depth := range []int{1, 3} {
		b.Run(fmt.Sprintf("levels=%d", depth), func(b *testing.B) {
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := []byte(fmt.Sprint("u", next.Add(1)%10_000))
					path := []nested.Node{{Limit: big, Guarantee: 0.01}, {Limit: big, Guarantee: 0.5}, {Limit: big}}[3-depth:]
					ids := []string{"user", "team", "org"}[3-depth:]
					keys := make([]string, depth)
					for i := range keys {
						key := k
						if i > 0 {
							key = []byte(ids[i])
						}
						keys[i] = cluster.NestedRedisKey("", ids[depth-1], []byte("acme"), ids[i], key)
					}
					res, err := bt.RunNested(keys, cluster.NestedArgs(path, 1, 0, time.Now().UnixNano()), 10*time.Second)
					var out nested.Outcome
					if ok, perr := cluster.ParseNested(res, depth, &out); err != nil || perr != nil || !ok {
						b.Fatalf("%v %v %+v", err, perr, out)
					}
				}
			})
		})
	}
}
