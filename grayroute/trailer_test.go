package grayroute_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// rawUpstream is a TCP server that records the bytes of each request it
// receives (up to the end of a chunked body) and answers 200 "ok".
func rawUpstream(t *testing.T) (addr string, got chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				var buf bytes.Buffer
				b := make([]byte, 4096)
				for !requestComplete(buf.String()) {
					n, err := c.Read(b)
					buf.Write(b[:n])
					if err != nil {
						break
					}
				}
				got <- buf.String()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}(c)
		}
	}()
	return ln.Addr().String(), got
}

// requestComplete reports whether raw holds a whole request with a chunked
// body: the last chunk and the (possibly empty) trailer section.
func requestComplete(raw string) bool {
	head, body, ok := strings.Cut(raw, "\r\n\r\n")
	if !ok || !strings.Contains(strings.ToLower(head), "transfer-encoding: chunked") {
		return ok
	}
	return strings.HasPrefix(body, "0\r\n") && strings.HasSuffix(body, "\r\n\r\n") ||
		strings.Contains(body, "\r\n0\r\n") && strings.HasSuffix(body, "\r\n\r\n")
}

// TestClientVersionHeaderNotForwardedInTrailers sends the version header as
// a request header and as a declared HTTP/1.1 request trailer. The upstream
// must see only the value the gray route decided: never the client's, in
// the headers or in the trailers.
func TestClientVersionHeaderNotForwardedInTrailers(t *testing.T) {
	upAddr, got := rawUpstream(t)
	port := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
}
http://127.0.0.1:%d {
	grayroute {
		gray beta {
			match_tag      X-Beta
			match_value    yes
			target_version v2
		}
	}
	reverse_proxy %s
}
`, testcaddy.Options(t), port, upAddr))

	// Declared, and sent undeclared beside a declared one.
	for _, declared := range []string{"X-Target-Version, X-Checksum", "X-Checksum"} {
		sendWithTrailer(t, port, declared, got)
	}
}

func sendWithTrailer(t *testing.T, port int, declared string, got chan string) {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
		"Transfer-Encoding: chunked\r\nTrailer: "+declared+"\r\n"+
		"X-Target-Version: spoofed-header\r\n\r\n"+
		"5\r\nhello\r\n0\r\nX-Target-Version: spoofed-trailer\r\nX-Checksum: abc\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var raw string
	select {
	case raw = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream received no request")
	}
	t.Logf("upstream received:\n%s", raw)
	lower := strings.ToLower(raw)
	if strings.Contains(raw, "spoofed") {
		t.Errorf("the client's X-Target-Version reached the upstream:\n%s", raw)
	}
	if n := strings.Count(lower, "x-target-version: "); n != 1 || !strings.Contains(lower, "x-target-version: v1\r\n") {
		t.Errorf("want exactly one X-Target-Version, v1 (the decided version); got %d in:\n%s", n, raw)
	}
	// Other trailers and the body pass through untouched.
	if !strings.Contains(raw, "hello") || !strings.Contains(lower, "x-checksum: abc") {
		t.Errorf("the body or the other trailer was lost:\n%s", raw)
	}
}
