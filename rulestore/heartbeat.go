package rulestore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Heartbeats: every instance refreshes its member in the sorted set
// gateway:instances (score = expiry time, ms) and counts the live ones, so
// a cluster quota can fall back to this instance's share when Redis fails.
const (
	instancesKey      = "gateway:instances"
	heartbeatInterval = 5 * time.Second
	heartbeatTTL      = 3 * heartbeatInterval
)

func (s *redisSource) heartbeat(ctx context.Context, now time.Time) error {
	if now.Before(s.nextHeartbeat) {
		return nil
	}
	s.nextHeartbeat = now.Add(heartbeatInterval)
	key := s.names.prefix + instancesKey
	pipe := s.client.TxPipeline()
	pipe.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(heartbeatTTL).UnixMilli()), Member: s.instanceID})
	pipe.ZRemRangeByScore(ctx, key, "-inf", fmt.Sprint(now.UnixMilli()))
	card := pipe.ZCard(ctx, key)
	pipe.PExpire(ctx, key, heartbeatTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	s.instances.Store(max(card.Val(), 1))
	return nil
}
