package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Gate is the health gate of one Redis client. After a failed call it is
// down: cluster decisions stop waiting on Redis at once and take their
// rule's on_redis_error path, while one background probe asks Redis every
// probeInterval (EXISTS on the key that failed) and brings the gate up when
// Redis answers. So a dead or hung
// Redis costs at most one redis_timeout per request that was already
// calling it, then nothing.
type Gate struct {
	client redis.UniversalClient
	Down   atomic.Bool
	Batch  *Batcher // the client's decisions, sent in pipelined batches
}

const (
	probeInterval = 250 * time.Millisecond
	probeTimeout  = 500 * time.Millisecond
)

// GateKey names the gate among the values kept with the store's client
// (Backend.ClientState), so a gate lives exactly as long as its client.
const GateKey = "ratelimit.gate"

func NewGate(c redis.UniversalClient) any { return &Gate{client: c, Batch: NewBatcher(c)} }

// Fail records a failed call: the first failure brings the gate down, logs
// it once and starts the probe.
// key is the Redis key of the failed call: the probe asks about it, so on
// a Redis Cluster it reaches the node that failed.
func (g *Gate) Fail(err error, key string, logger *zap.Logger) {
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
			return // the config that owned the client is gone, and the Gate with it
		}
	}
}

// Unreachable tells a Redis that cannot serve (connection refused or lost,
// timeout, loading, failover, cluster down) from a reply error about one
// command, which says nothing about the others.
func Unreachable(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err)
}

var Transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "sluice", Subsystem: "ratelimit", Name: "redis_transitions_total",
	Help: "Transitions of the Redis health Gate of cluster rate limits (to down or up).",
}, []string{"to"})

var ErrGateDown = errors.New("redis marked unreachable")
