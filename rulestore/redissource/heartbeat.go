package redissource

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Heartbeats: every instance refreshes its member in the sorted set
// gateway:instances (score = expiry time, ms) and counts the live ones, so
// a cluster quota can fall back to this instance's share when Redis fails.
// An expired member stays stoppedShown more (a stopped instance: its
// verdicts read "stopped"), then goes, and its verdict rows with it
// (verdicts.go).
const (
	instancesKey      = "gateway:instances"
	heartbeatInterval = 5 * time.Second
	heartbeatTTL      = 3 * heartbeatInterval
	stoppedShown      = heartbeatTTL
)

// leave expires this instance's heartbeat on a clean stop, so its verdicts
// read as a stopped instance's at once (after a crash: within heartbeatTTL).
func (s *redisSource) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), min(s.timeout, 200*time.Millisecond))
	defer cancel()
	key := s.names.prefix + instancesKey
	pipe := s.client.TxPipeline()
	pipe.ZAddXX(ctx, key, redis.Z{Score: float64(time.Now().UnixMilli() - 1), Member: s.instanceID})
	pipe.PExpire(ctx, key, heartbeatTTL+stoppedShown)
	pipe.Exec(ctx)
	s.client.Del(ctx, s.declaresKey(s.instanceID))
}

// members returns the heartbeat members alive now (true) and those
// stopped less than stoppedShown ago (false).
func (s *redisSource) members(ctx context.Context) (map[string]bool, error) {
	all, err := s.client.ZRangeWithScores(ctx, s.names.prefix+instancesKey, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	now := float64(time.Now().UnixMilli())
	out := make(map[string]bool, len(all))
	for _, z := range all {
		if m, ok := z.Member.(string); ok && z.Score >= now-float64(stoppedShown.Milliseconds()) {
			out[m] = z.Score >= now
		}
	}
	return out, nil
}

// liveMembers returns the heartbeat members alive now.
func (s *redisSource) liveMembers(ctx context.Context) (map[string]bool, error) {
	live, err := s.client.ZRangeByScore(ctx, s.names.prefix+instancesKey,
		&redis.ZRangeBy{Min: fmt.Sprint(time.Now().UnixMilli()), Max: "+inf"}).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(live))
	for _, m := range live {
		out[m] = true
	}
	return out, nil
}

func (s *redisSource) heartbeat(ctx context.Context, now time.Time) error {
	// A reload that changes the declared rules beats at once, so the
	// fleet reads the new declarations (declares.go) without waiting.
	app := s.app.Load()
	if now.Before(s.nextHeartbeat) && app == s.declaredBy {
		return nil
	}
	s.nextHeartbeat, s.declaredBy = now.Add(heartbeatInterval), app
	key := s.names.prefix + instancesKey
	pipe := s.client.TxPipeline()
	pipe.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(heartbeatTTL).UnixMilli()), Member: s.instanceID})
	pipe.ZRemRangeByScore(ctx, key, "-inf", fmt.Sprint(now.Add(-stoppedShown).UnixMilli()))
	card := pipe.ZCount(ctx, key, fmt.Sprint(now.UnixMilli()), "+inf")
	pipe.PExpire(ctx, key, heartbeatTTL+stoppedShown)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	if err := s.beatDeclares(ctx); err != nil {
		return err
	}
	s.instances.Store(max(card.Val(), 1))
	return nil
}
