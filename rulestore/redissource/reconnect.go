package redissource

import (
	"context"
	"crypto/tls"
	"errors"
	mrand "math/rand/v2"
	"net"
	"time"
)

// Reconnecting. A failed session is retried after a backoff that doubles up
// to maxBackoff, so a Redis that accepts connections but fails the session
// (ACL, a hung server) is not hammered. Meanwhile a cheap probe (a PING on a
// fresh connection) runs every probeInterval: as soon as it finds Redis
// answering again after it did not, the wait ends and the backoff resets,
// so the store resubscribes and resyncs within a probe interval or so of
// Redis coming back, however long it was gone.
const (
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = 5 * time.Second
	probeInterval = 100 * time.Millisecond
)

// jitter spreads d over [d/2, 3d/2), so instances that lost Redis together
// do not all come back at the same instant.
func jitter(d time.Duration) time.Duration {
	return d/2 + mrand.N(d+1)
}

// waitToReconnect waits about backoff before the next session, and less if
// Redis comes back: cameBack reports that Redis was unreachable (the
// session could not connect, or a probe failed) and a later probe
// succeeded, and then the caller resets its backoff. Counting the
// session's own failure matters: Redis may come back just between that
// failure and the first probe, which then succeeds at once.
func (s *redisSource) waitToReconnect(ctx context.Context, backoff time.Duration, sessionErr error) (cameBack bool) {
	deadline := time.Now().Add(jitter(backoff))
	unreachable := couldNotConnect(sessionErr)
	for {
		wait := min(jitter(probeInterval), time.Until(deadline))
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
		if !time.Now().Before(deadline) {
			return false
		}
		if !probeRedis(ctx, s.probeAddrs, s.probeTLS, s.timeout) {
			unreachable = true
		} else if unreachable {
			return true
		}
	}
}

// probeRedis reports whether any of addrs answers a PING within timeout.
// Any reply counts (also -NOAUTH): the server is up; the session that
// follows authenticates.
func probeRedis(ctx context.Context, addrs []string, tlsConfig *tls.Config, timeout time.Duration) bool {
	for _, addr := range addrs {
		if probeAddr(ctx, addr, tlsConfig, timeout) {
			return true
		}
	}
	return false
}

func probeAddr(ctx context.Context, addr string, tlsConfig *tls.Config, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if tlsConfig != nil {
		cfg := tlsConfig.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return false
		}
		conn = tc
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	var b [1]byte
	n, err := conn.Read(b[:])
	return err == nil && n == 1 && (b[0] == '+' || b[0] == '-')
}

// couldNotConnect reports whether err is a failure to reach Redis at all
// (refused, no route, dial timeout), as opposed to a Redis that answered
// and failed the session (ACL, a script error).
func couldNotConnect(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
