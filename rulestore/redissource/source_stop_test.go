package redissource

import (
	"github.com/sluicegw/sluice/rulestore"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/rulestore/redisconf"
)

// A source started and stopped at the same moment (a config whose start
// overlaps the last one's cleanup): under -race, Destruct must not read
// the start's cancel and done unsynchronised, and must not return while
// the follower it started still runs.
func TestSourceStartAndStopConcurrently(t *testing.T) {
	r := redistest.Start(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // no local rule snapshot of another test
	for i := 0; i < 20; i++ {
		rs, err := acquireSource(rulestore.RedisSourceConfig{Redis: &redisconf.Config{URL: r.URL()}, Resync: time.Hour, Logger: nopLogger})
		if err != nil {
			t.Fatal(err)
		}
		src := rs.(*redisSource)
		key := src.poolKey
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); src.start() }()
		go func() { defer wg.Done(); _, _ = sources.Delete(key) }()
		wg.Wait()
		if src.done != nil {
			select {
			case <-src.done:
			default:
				t.Fatalf("round %d: the source's follower still runs after Destruct returned", i)
			}
		}
	}
}
