package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// proc is a redis-server process (TLS server, Sentinel) started with its
// own readiness check and killed when the test ends.
type proc struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startProc runs redis-server with args, logging to dir/redis.log, and
// waits until ready reports nil (or the process exits, or 10s pass).
func startProc(t testing.TB, dir string, args []string, ready func() error) (*proc, error) {
	t.Helper()
	cmd := exec.Command(binary(t, "redis-server"), args...)
	logf, err := os.OpenFile(filepath.Join(dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	// 10s: a busy 2-core machine starts redis-server in well under a second.
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("redis-server exited; log: %s", p.log())
		default:
		}
		err := ready()
		if err == nil {
			t.Cleanup(p.kill)
			return p, nil
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("not ready: %v; log: %s", err, p.log())
		}
		time.Sleep(20 * time.Millisecond) // sleep: poll interval of a readiness loop with a deadline
	}
}

func (p *proc) log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "redis.log"))
	return string(b)
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Kill()
	<-p.done
}
