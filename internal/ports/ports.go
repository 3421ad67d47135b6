// Package ports hands out free loopback TCP ports to tests, never the same
// one to two test processes at once, and never one the kernel may hand out
// by itself.
//
// Two ways a port found free can be taken before its test binds it:
//
//   - `go test ./...` runs packages in parallel processes, and a port free
//     now can be handed to a test in another process too. Since Caddy
//     listens with SO_REUSEPORT, the second listener does not fail: the two
//     servers silently share the port's connections. So each port handed out
//     is locked (flock on a file named after it) for the rest of the
//     process's life; other processes skip locked ports.
//   - The kernel picks ports for listeners on :0 (httptest servers) and for
//     outgoing connections from its ephemeral range. A port found with
//     listen-on-:0-then-close lies in that range, so an httptest server
//     started a moment later could get the same one (CI once saw Caddy's
//     admin endpoint fail to bind the port an upstream had just taken). So
//     ports are drawn only from outside ip_local_port_range.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// held keeps the lock files open (closing one would release its lock).
var held struct {
	sync.Mutex
	files []*os.File
}

// lowest is the first port handed out: ports below it are left to system
// services.
const lowest = 10000

// Free returns a free loopback port, reserved for this process.
func Free(t testing.TB) int {
	t.Helper()
	return FreeWithOffset(t, 0)
}

// FreeWithOffset returns a free loopback port p such that p+offset is free
// too, both reserved for this process (a Redis cluster node listens on p and
// its bus on p+10000). offset 0 asks for one port.
func FreeWithOffset(t testing.TB, offset int) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "sluice-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ephLo, ephHi := ephemeralRange()
	for i := 0; i < 5000; i++ {
		p := lowest + rand.IntN(65536-lowest-offset)
		if !usable(p, ephLo, ephHi) || (offset != 0 && !usable(p+offset, ephLo, ephHi)) {
			continue
		}
		if !reserve(dir, p) {
			continue
		}
		if offset == 0 || reserve(dir, p+offset) {
			return p
		}
		// p stays reserved; it is simply never handed out.
	}
	t.Fatal("no free port outside the ephemeral range")
	return 0
}

// usable reports whether p lies outside the kernel's ephemeral range and
// nothing listens on it now.
func usable(p, ephLo, ephHi int) bool {
	if p >= ephLo && p <= ephHi {
		return false
	}
	for _, addr := range []string{"127.0.0.1", ""} {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// ephemeralRange reads the kernel's ephemeral port range, Linux's default if
// it cannot.
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
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
