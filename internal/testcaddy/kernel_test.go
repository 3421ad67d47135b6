package testcaddy

import (
	"net"
	"testing"
)

func TestKernelListenersSeesOpenAndClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	n, ok := kernelListeners(port)
	if !ok {
		t.Fatal("/proc/net/tcp not readable: the reload wait would not see the kernel's sockets")
	}
	if n != 1 {
		t.Fatalf("%d listening sockets on port %d, want 1", n, port)
	}
	ln.Close()
	if n, _ := kernelListeners(port); n != 0 {
		t.Fatalf("%d listening sockets on port %d after Close, want 0", n, port)
	}
}

func TestPortCounts(t *testing.T) {
	got := portCounts([][2]string{{"tcp", ":8080"}, {"tcp", "127.0.0.1:8080"}, {"tcp", "[::1]:9"}, {"udp", ":8080"}, {"unix", "/x"}})
	if got[8080] != 2 || got[9] != 1 || len(got) != 2 {
		t.Fatalf("portCounts = %v", got)
	}
}
