package faults_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// resetCounts is what keep-alive clients saw across a series of reloads.
type resetCounts struct {
	resets     int // connection reset (ECONNRESET) before any response byte
	closed     int // connection closed (EOF) before any response byte
	readErrors int // any other error while reading a response
	dialErrors int
	non2xx     int
	ok         int
}

func (c resetCounts) lost() int { return c.resets + c.closed + c.readErrors + c.dialErrors }

func (c resetCounts) add(d resetCounts) resetCounts {
	return resetCounts{c.resets + d.resets, c.closed + d.closed, c.readErrors + d.readErrors,
		c.dialErrors + d.dialErrors, c.non2xx + d.non2xx, c.ok + d.ok}
}

// TestReloadResetsVersusPlainCaddy runs the same keep-alive load against
// plain Caddy (`respond`, no Sluice module) and against the Sluice chain
// (rate limit, breaker, gray route, then `respond`), reloading each N
// times between two configs, and counts what the clients saw per
// connection per reload. The clients are raw HTTP/1.1 keep-alive
// connections that never resend, so every loss is counted. Caddy closes
// every keep-alive connection on a reload (its old server shuts down), so
// both lose about one request per connection per reload; Sluice must not
// lose more. N is 20 in `make test`; SLUICE_RELOAD_RESETS=50 gives the run
// documented in docs/reliability.md.
//
// The two are measured in alternating blocks of N/4 reloads, so a change
// in the machine's load meets both alike; and N is 20 even in the short
// run: at 5 reloads each (80 connection-reloads), one fresh-clone run saw
// 95 losses for Sluice against 79 for plain Caddy, while two runs of 20
// under stress-ng read 1.03 against 1.00-1.03 per connection per reload
// (the resets of dials queued on the old listener swing from 4 to 52 per
// run, whichever server it is).
func TestReloadResetsVersusPlainCaddy(t *testing.T) {
	reloads := 20
	if v := os.Getenv("SLUICE_RELOAD_RESETS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_RELOAD_RESETS=%q: want a number of reloads", v)
		}
		reloads = n
	}
	const conns = 16
	var plain, sluice resetCounts
	for done := 0; done < reloads; {
		n := min(max(reloads/4, 1), reloads-done)
		plain = plain.add(measureReloadResets(t, "plain", conns, n))
		sluice = sluice.add(measureReloadResets(t, "sluice", conns, n))
		done += n
	}
	per := func(c resetCounts) float64 { return float64(c.lost()) / float64(conns*reloads) }
	for _, r := range []struct {
		name string
		c    resetCounts
	}{{"plain Caddy", plain}, {"Sluice chain", sluice}} {
		t.Logf("RESULT %-12s %d reloads x %d keep-alive connections: ok=%d resets=%d closed-before-response=%d read-errors=%d dial-errors=%d non-2xx=%d; lost per connection per reload=%.2f",
			r.name, reloads, conns, r.c.ok, r.c.resets, r.c.closed, r.c.readErrors, r.c.dialErrors, r.c.non2xx, per(r.c))
	}
	// The margin: runs of the same server differ by a few percent (measured
	// 625-649 for 640 connection-reloads); 10% of the connection-reloads
	// plus 2 absorbs that without hiding a systematic excess.
	margin := conns*reloads/10 + 2
	if sluice.lost() > plain.lost()+margin {
		t.Errorf("the Sluice chain lost %d requests over %d reloads, plain Caddy %d: more than the margin %d", sluice.lost(), reloads, plain.lost(), margin)
	}
	if sluice.non2xx != 0 || plain.non2xx != 0 {
		t.Errorf("non-2xx answers: Sluice %d, plain %d; want none", sluice.non2xx, plain.non2xx)
	}
}

// reloadResetsConfig is the Caddyfile of one generation.
func reloadResetsConfig(kind, options string, port int, gen string) string {
	if kind == "plain" {
		return fmt.Sprintf("{\n\t%s\n}\nhttp://127.0.0.1:%d {\n\theader X-Generation %s\n\trespond \"ok\"\n}\n", options, port, gen)
	}
	return fmt.Sprintf(`{
	%s
	rulestore {
		rate_limit rl {
			qps          1000000
			burst        1000000
			key_resolver global
		}
		circuit_breaker cb {
			failure_threshold 1000
		}
		gray canary {
			match_tag      X-Canary
			match_value    true
			target_version v2
		}
	}
}
http://127.0.0.1:%d {
	header X-Generation %s
	ratelimit rl
	circuitbreaker cb
	grayroute canary
	respond "ok"
}
`, options, port, gen)
}

func measureReloadResets(t *testing.T, kind string, conns, reloads int) resetCounts {
	var out resetCounts
	t.Run(kind, func(t *testing.T) {
		port := testcaddy.FreePort(t)
		options := testcaddy.Options(t)
		gens := [2]string{reloadResetsConfig(kind, options, port, "A"), reloadResetsConfig(kind, options, port, "B")}
		if err := testcaddy.Validate(gens[0]); err != nil {
			t.Fatalf("%s config: %v", kind, err)
		}
		testcaddy.Run(t, gens[0])
		addr := fmt.Sprintf("127.0.0.1:%d", port)

		var mu sync.Mutex
		var answered atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < conns; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var c resetCounts
				keepAliveClient(addr, stop, &answered, &c)
				mu.Lock()
				out.resets += c.resets
				out.closed += c.closed
				out.readErrors += c.readErrors
				out.dialErrors += c.dialErrors
				out.non2xx += c.non2xx
				out.ok += c.ok
				mu.Unlock()
			}()
		}
		wait := func(n int64) {
			target := answered.Load() + n
			testcaddy.Eventually(t, 20*time.Second, fmt.Sprintf("%d more answers", n), func() bool { return answered.Load() >= target })
		}
		wait(int64(4 * conns)) // every connection open and busy
		for i := 0; i < reloads; i++ {
			testcaddy.Reload(t, gens[(i+1)%2])
			wait(int64(4 * conns)) // traffic on the new generation before the next reload
		}
		close(stop)
		wg.Wait()
	})
	return out
}

// keepAliveClient sends GETs one after another on one keep-alive
// connection, counting each failure by kind and opening a new connection
// after it, until stop. It never resends a request.
func keepAliveClient(addr string, stop chan struct{}, answered *atomic.Int64, c *resetCounts) {
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if conn == nil {
			var err error
			conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				c.dialErrors++
				conn = nil
				continue
			}
			br = bufio.NewReader(conn)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		if err == nil {
			_, err = br.Peek(1)
			if err != nil {
				switch {
				case errors.Is(err, syscall.ECONNRESET):
					c.resets++
				case errors.Is(err, io.EOF):
					c.closed++
				default:
					c.readErrors++
				}
				conn.Close()
				conn = nil
				continue
			}
			var resp *http.Response
			resp, err = http.ReadResponse(br, nil)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil {
					answered.Add(1)
					if resp.StatusCode/100 == 2 {
						c.ok++
					} else {
						c.non2xx++
					}
					if resp.Close {
						conn.Close()
						conn = nil
					}
					continue
				}
			}
		}
		// A write error, or a read error after the first response byte.
		c.readErrors++
		conn.Close()
		conn = nil
	}
}
