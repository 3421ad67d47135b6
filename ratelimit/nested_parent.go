package ratelimit

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/rulestore"
)

// parentTTL is how long a parent key read from Redis is used before it is
// read again: an operator's change to gateway:parent:<rule id> applies
// within it.
const parentTTL = time.Second

// ParentHash is the Redis hash (after the store's prefix) that maps a
// rule's keys to their parents' keys when the rule has no parent_key:
// field the rule's key, value the parent's key.
func ParentHash(prefix, ruleID string) string { return prefix + "gateway:parent:" + ruleID }

// parentCache keeps the parent keys read from a rule's parent hash, each
// for parentTTL; a key without a parent is kept too (as "").
type parentCache struct {
	mu sync.Mutex
	m  map[string]parentEntry
}

type parentEntry struct {
	parent string
	until  int64 // engine time
}

// parentKey appends the parent's key of rule r's key to kb: by r's
// parent_key, or from its parent hash in app's Redis. ok is false when the
// request has none (no value, no field, no Redis, or Redis failed).
func (c *parentCache) parentKey(kb []byte, req *http.Request, app *rulestore.App, r *Rule, key []byte, now int64) (_ []byte, ok bool) {
	if r.Nest.HasParentKey {
		from := len(kb)
		out, ok := r.Nest.ParentKey.Append(kb, req)
		if !ok {
			return out[:from], false
		}
		return out, true
	}
	c.mu.Lock()
	e, hit := c.m[string(key)]
	c.mu.Unlock()
	if !hit || e.until < now {
		parent, err := readParent(req.Context(), app.Client(), ParentHash(app.KeyPrefix(), r.ID), string(key), r.RedisTimeout)
		if err != nil {
			return kb, false // not cached: the next request asks again
		}
		e = parentEntry{parent: parent, until: now + int64(parentTTL)}
		c.mu.Lock()
		if c.m == nil || len(c.m) >= 100_000 {
			c.m = map[string]parentEntry{} // a bound, not an LRU: a full cache starts afresh
		}
		c.m[string(key)] = e
		c.mu.Unlock()
	}
	return append(kb, e.parent...), e.parent != ""
}

// readParent reads field key of hash, "" when it is missing.
func readParent(ctx context.Context, client redis.UniversalClient, hash, key string, timeout time.Duration) (string, error) {
	if client == nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := client.HGet(ctx, hash, key).Result()
	if err == redis.Nil {
		return "", nil
	}
	return v, err
}
