// Package ports hands out free loopback TCP ports to tests, never the same
// one to two test processes at once.
//
// `go test ./...` runs packages in parallel processes. A port found free
// with listen-on-:0-then-close can be handed to a test in another process
// before the first one binds it; and since Caddy listens with SO_REUSEPORT,
// the second listener does not fail: the two servers silently share the
// port's connections (a request then meets the other test's server). So
// each port handed out is locked (flock on a file named after it) for the
// rest of the process's life; other processes skip locked ports.
package ports

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// held keeps the lock files open (closing one would release its lock).
var held struct {
	sync.Mutex
	files []*os.File
}

// Free returns a free loopback port, reserved for this process.
func Free(t testing.TB) int { return FreeBelow(t, 65536) }

// FreeBelow returns a free loopback port below limit, reserved for this
// process.
func FreeBelow(t testing.TB, limit int) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "sluice-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p < limit && reserve(dir, p) {
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// reserve locks port p for this process; false if another process (or this
// one) holds it.
func reserve(dir string, p int) bool {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(p)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return false
	}
	// flock locks are per open file: this process's own earlier lock on p
	// also refuses, so a port is never handed out twice here either.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	held.Lock()
	held.files = append(held.files, f)
	held.Unlock()
	return true
}
