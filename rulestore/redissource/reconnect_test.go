package redissource

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
)

// A session that could not connect counts as "Redis unreachable": if Redis
// answers the very first probe after it (it came back in between, or
// go-redis's own dial breaker refused the session while Redis was already
// up), the wait ends at once instead of running out a backoff of seconds.
// A Redis that answered and failed the session (nil or another error)
// waits the backoff out, so it is not hammered.
func TestWaitToReconnectAfterDialFailure(t *testing.T) {
	r := redistest.Start(t)
	s := &redisSource{probeAddrs: []string{r.Addr}, timeout: time.Second}
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}
	const backoff = 5 * time.Second // jittered to at least 2.5 s

	start := time.Now()
	if !s.waitToReconnect(context.Background(), backoff, dialErr) {
		t.Fatal("after a dial failure, a Redis answering the first probe did not end the wait")
	}
	// The bound is far below the 2.5 s the backoff would take at least.
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the wait took %v", took)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	if s.waitToReconnect(ctx, backoff, nil) {
		t.Fatal("a session that failed with Redis answering ended the wait early")
	}
	if !couldNotConnect(dialErr) || couldNotConnect(context.DeadlineExceeded) || couldNotConnect(nil) {
		t.Fatal("couldNotConnect misclassifies")
	}
}
