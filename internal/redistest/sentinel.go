package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is one `redis-server <conf> --sentinel` process watching a
// master under a name.
type Sentinel struct {
	Port       int
	Addr       string // 127.0.0.1:port
	MasterName string
}

// StartSentinel runs a Sentinel on a free loopback port that monitors
// master as name (quorum 1), and waits until it reports the master's
// address. extraConf lines are added to its config file (e.g.
// "requirepass secret"). It is stopped when the test ends.
func StartSentinel(t testing.TB, master *Server, name string, extraConf ...string) *Sentinel {
	t.Helper()
	s := &Sentinel{MasterName: name}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		dir := t.TempDir()
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\nloglevel warning\ndir %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 5000\n",
			s.Port, dir, name, master.Port, name)
		password := ""
		for _, line := range extraConf {
			conf += line + "\n"
			if v, ok := strings.CutPrefix(line, "requirepass "); ok {
				password = v
			}
		}
		// Sentinel rewrites its config file, so it must be writable.
		path := filepath.Join(dir, "sentinel.conf")
		if err = os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Password: password, DialTimeout: 500 * time.Millisecond, MaxRetries: -1})
		_, err = startProc(t, dir, []string{path, "--sentinel"}, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			addr, err := c.GetMasterAddrByName(ctx, name).Result()
			if err != nil {
				return err
			}
			if got := net.JoinHostPort(addr[0], addr[1]); got != master.Addr {
				return fmt.Errorf("sentinel reports master %s, want %s", got, master.Addr)
			}
			return nil
		})
		c.Close()
		if err == nil {
			return s
		}
	}
	t.Fatalf("redis sentinel would not start: %v", err)
	return nil
}
