// Package redistest runs real redis-server processes for tests: standalone
// servers on free loopback ports that a test can kill, restart on the same
// port, pause and flush, and real Redis Cluster nodes joined together.
package redistest

import (
	"context"
	"fmt"
	"github.com/sluicegw/sluice/internal/ports"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process owned by a test.
type Server struct {
	Port int
	Addr string // 127.0.0.1:port

	t     testing.TB
	dir   string
	extra []string
	cmd   *exec.Cmd
	done  chan struct{}
}

// binary finds redis-server, or ends the test: skipped under -short, failed
// otherwise, with the command that installs it.
func binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found: run `make test` (it installs it) or `apt-get install -y redis-server`", name)
	if testing.Short() {
		t.Skip(msg)
	}
	t.Fatal(msg)
	return ""
}

// Start runs a redis-server with no persistence on a free loopback port and
// stops it when the test ends.
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	binary(t, "redis-server")
	s := &Server{t: t, dir: t.TempDir(), extra: extraArgs}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if err = s.launch(); err == nil {
			t.Cleanup(s.stop)
			return s
		}
	}
	t.Fatalf("redis-server would not start: %v", err)
	return nil
}

func (s *Server) launch() error {
	args := []string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning",
	}
	args = append(args, s.extra...)
	cmd := exec.Command(binary(s.t, "redis-server"), args...)
	logf, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	if err := s.waitReady(10 * time.Second); err != nil {
		s.Kill()
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		return fmt.Errorf("%v; log: %s", err, log)
	}
	return nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on %s exited", s.Addr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not ready: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond) // sleep: poll interval of a readiness loop with a deadline
	}
}

// URL is the server's address as a redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Client returns a new client to the server, closed at test cleanup.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// Kill ends the server with SIGKILL and waits until it is gone.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // a paused process must die too
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port, empty (no persistence).
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // sleep: the port may linger briefly; retried until a deadline
	}
	s.t.Fatalf("restart redis-server on %s: %v", s.Addr, err)
}

// Pause stops the process (SIGSTOP): connections stay open, commands hang.
func (s *Server) Pause() { s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.cmd.Process.Signal(syscall.SIGCONT) }

// Flush deletes every key (FLUSHALL).
func (s *Server) Flush() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		s.t.Fatalf("flushall: %v", err)
	}
}

func (s *Server) stop() { s.Kill() }

// freePort finds a free loopback port p, reserved for this test process
// with p+10000 (the cluster bus of a cluster node).
func freePort(t testing.TB) int {
	t.Helper()
	return ports.FreeWithOffset(t, 10000)
}

// Cluster is a real Redis Cluster of redis-server nodes, all masters.
type Cluster struct {
	Nodes []*Server
}

// Addrs lists the nodes' addresses, for a cluster client's seeds.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// NodesHolding counts the nodes holding a key that matches pattern: a test
// of keys spread over the cluster's slots wants more than one.
func (c *Cluster) NodesHolding(pattern string) int {
	n := 0
	for _, node := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: node.Addr})
		if keys, _ := rc.Keys(context.Background(), pattern).Result(); len(keys) > 0 {
			n++
		}
		rc.Close()
	}
	return n
}

// StartCluster starts n (at least 3) cluster-enabled nodes, joins them with
// `redis-cli --cluster create` and waits until the cluster reports ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 3 {
		n = 3
	}
	cli := binary(t, "redis-cli")
	c := &Cluster{}
	for i := 0; i < n; i++ {
		c.Nodes = append(c.Nodes, Start(t, "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, node := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: node.Addr})
		for {
			info, err := rc.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				rc.Close()
				t.Fatalf("cluster node %s not ok: %v %s", node.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond) // sleep: poll interval of a readiness loop with a deadline
		}
		rc.Close()
	}
	return c
}

// Client returns a cluster client seeded with every node, closed at cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Push writes a rule hash and publishes its id, as a user does with
// `redis-cli HSET key ...` then `redis-cli PUBLISH channel id`.
func Push(t testing.TB, c redis.Cmdable, key, channel, id string, fields ...any) {
	t.Helper()
	ctx := context.Background()
	if err := c.HSet(ctx, key, fields...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, channel, id).Err(); err != nil {
		t.Fatal(err)
	}
}
