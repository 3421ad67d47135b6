package cluster

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Gate is the health gate of one Redis client. After a failed call it is
// down: cluster decisions stop waiting on Redis at once and take their
// rule's on_redis_error path, while one background probe asks Redis every
// probeInterval (EXISTS on the key that failed) and brings the gate up when
// Redis answers. So a dead or hung
// Redis costs at most one redis_timeout per request that was already
// calling it (or that came while a timeout was being confirmed), then
// nothing.
//
// A refused or lost connection, or Redis saying it cannot serve, brings
// the gate down at once. A timeout may be this host's own stall (a GC or
// CPU pause that delayed the answer, not Redis): the gate stays up while
// one probe asks Redis at once, and goes down only if that probe fails
// too. Otherwise one late answer on a busy host would send every cluster
// rule on the client to its failure path for a probe interval.
type Gate struct {
	client     redis.UniversalClient
	Down       atomic.Bool
	confirming atomic.Bool
	Batch      *Batcher // the client's decisions, sent in pipelined batches
}

const (
	probeInterval = 250 * time.Millisecond
	probeTimeout  = 500 * time.Millisecond
)

// GateKey names the gate among the values kept with the store's client
// (Backend.ClientState), so a gate lives exactly as long as its client.
const GateKey = "ratelimit.gate"

func NewGate(c redis.UniversalClient) any { return &Gate{client: c, Batch: NewBatcher(c)} }

// Fail records a failed call: the first failure (for a timeout, once a
// probe confirmed it) brings the gate down, logs it once and starts the
// probe. key is the Redis key of the failed call: the probes ask about
// it, so on a Redis Cluster they reach the node that failed.
func (g *Gate) Fail(err error, key string, logger *zap.Logger) {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		if !g.Down.Load() && g.confirming.CompareAndSwap(false, true) {
			go g.confirm(err, key, logger)
		}
		return
	}
	g.down(err, key, logger)
}

// confirm asks Redis once after a timed-out call: an answer says the
// timeout was this host's, no answer brings the gate down.
func (g *Gate) confirm(err error, key string, logger *zap.Logger) {
	defer g.confirming.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	perr := g.client.Exists(ctx, key).Err()
	cancel()
	if perr == nil || !Unreachable(perr) || errors.Is(perr, redis.ErrClosed) {
		return // answered; or the config that owned the client is gone
	}
	g.down(err, key, logger)
}

func (g *Gate) down(err error, key string, logger *zap.Logger) {
	if !g.Down.CompareAndSwap(false, true) {
		return
	}
	Transitions.WithLabelValues("down").Inc()
	if logger != nil {
		logger.Warn("redis unreachable: cluster rate limits follow on_redis_error until it answers again", zap.Error(err))
	}
	go g.probe(key, logger)
}

func (g *Gate) probe(key string, logger *zap.Logger) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for range t.C {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		err := g.client.Exists(ctx, key).Err()
		cancel()
		// Any answer from a Redis able to serve will do (even NOPERM,
		// should the ACL allow the scripts but not EXISTS).
		if err == nil || !Unreachable(err) {
			g.Down.Store(false)
			Transitions.WithLabelValues("up").Inc()
			if logger != nil {
				logger.Info("redis reachable again: cluster rate limits enforced through redis")
			}
			return
		}
		if errors.Is(err, redis.ErrClosed) {
			return // the config that owned the client is gone, and the gate with it
		}
	}
}
