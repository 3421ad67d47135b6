package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// What GET /sluice/quota reads of a cluster rule's key: the value as the
// scripts left it, without running one.

// ReadCount reads a calendar window's count at rkey: "" without the key.
func ReadCount(ctx context.Context, c redis.UniversalClient, rkey string) (string, error) {
	v, err := c.Get(ctx, rkey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	return v, nil
}

// ReadState reads the packed state at rkey (nil without the key) and
// Redis's clock, in one round trip.
func ReadState(ctx context.Context, c redis.UniversalClient, rkey string) (v []byte, now time.Time, err error) {
	var get *redis.StringCmd
	var clock *redis.TimeCmd
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		clock = p.Time(ctx)
		get = p.Get(ctx, rkey)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, time.Time{}, err
	}
	v, _ = get.Bytes()
	return v, clock.Val(), nil
}
