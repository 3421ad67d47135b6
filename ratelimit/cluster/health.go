package cluster

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Transitions counts the health gates' transitions, to down or up
// (sluice_ratelimit_redis_transitions_total); the handler registers it.
var Transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "sluice", Subsystem: "ratelimit", Name: "redis_transitions_total",
	Help: "Transitions of the Redis health gate of cluster rate limits (to down or up).",
}, []string{"to"})

// ErrGateDown is a decision's error while its client's gate is down.
var ErrGateDown = errors.New("redis marked unreachable")

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
