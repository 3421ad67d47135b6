package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestKillRestartKeepsAddress(t *testing.T) {
	s := Start(t)
	addr := s.Addr
	c := s.Client()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("ping succeeded on a killed server")
	}
	s.Restart()
	if s.Addr != addr {
		t.Fatalf("address changed: %s -> %s", addr, s.Addr)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping after restart: %v", err)
	}
	if n, _ := c.Exists(ctx, "k").Result(); n != 0 {
		t.Fatal("restarted server kept data: persistence should be off")
	}
}

func TestPausedServerTimesOut(t *testing.T) {
	s := Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	err := c.Ping(ctx).Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("ping on a paused server: want a timeout, got %v", err)
	}
	s.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping after resume: %v", err)
	}
}

func TestFlush(t *testing.T) {
	s := Start(t)
	c := s.Client()
	ctx := context.Background()
	c.Set(ctx, "k", "v", 0)
	s.Flush()
	if n, _ := c.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("dbsize after flush = %d", n)
	}
}

func TestClusterAcceptsWritesInEverySlotRange(t *testing.T) {
	cl := StartCluster(t, 3)
	c := cl.Client(t)
	ctx := context.Background()
	seen := map[string]bool{}
	for i := 0; i < 64; i++ {
		key := fmt.Sprintf("key-%d", i)
		if err := c.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("set %s: %v", key, err)
		}
		slot, _ := c.ClusterKeySlot(ctx, key).Result()
		seen[fmt.Sprint(slot/5462)] = true // which third of the slots
	}
	if len(seen) < 3 {
		t.Fatalf("keys landed in %d of 3 slot ranges", len(seen))
	}
	for i := 0; i < 64; i++ {
		key := fmt.Sprintf("key-%d", i)
		if v, err := c.Get(ctx, key).Int(); err != nil || v != i {
			t.Fatalf("get %s = %v, %v", key, v, err)
		}
	}
}
