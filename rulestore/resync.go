package rulestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// fullResync reloads every rule from Redis and reconciles it with what is
// held: new and changed rules are applied, rules gone from Redis are dropped,
// unless Redis lost its data (see checkEpoch).
func (s *redisSource) fullResync(ctx context.Context, reason string) error {
	// Ids queued by messages taken before it are read by the resync too.
	// Re-read after it, one named before Redis lost its data would read as
	// a delete: the session that took the messages can end on the lost
	// connection before it re-reads them, and the next one's resync
	// retains the rule only for that re-read to drop it.
	s.queue.drop()
	return s.resyncAttempt(ctx, reason, 1)
}

func (s *redisSource) resyncAttempt(ctx context.Context, reason string, attempt int) error {
	start := time.Now()
	s.publishEdit() // the resync starts from the layer in force
	if err := s.checkEpoch(ctx); err != nil {
		return err
	}
	// Note the change log's tail first: entries appended during the scan are
	// read again by the next poll, which is harmless.
	if err := s.streamTail(ctx); err != nil {
		return err
	}
	keys, err := s.scanRuleKeys(ctx)
	if err != nil {
		return err
	}
	hashes, err := s.readHashes(ctx, keys)
	if err != nil {
		return err
	}
	// Redis may have restarted empty during the scan: then the rules it
	// no longer has are lost data, not deletes. Start over, so checkEpoch
	// retains them.
	if m, err := s.client.Get(ctx, s.names.Epoch()).Result(); err != nil && err != redis.Nil {
		return err
	} else if m != s.epoch {
		if attempt >= 3 {
			return errors.New("redis epoch marker keeps changing during the resync")
		}
		return s.resyncAttempt(ctx, reason, attempt+1)
	}
	cur := s.snap.Load()
	next := *newLayer()
	var added, updated, removed, rejected int
	var noGood []ruleRef
	for _, k := range Kinds() {
		next[k] = make(map[string]*slot, len(hashes[k]))
		for id, f := range hashes[k] {
			old := cur.get(k, id)
			delete(s.retained, ruleRef{k, id})
			switch {
			case old != nil && old.Fields.Equal(f):
				next[k][id] = newSlot(old) // same rule: handlers see no change
				s.feedback.reaccepted(k, id, f)
			default:
				r, ok := s.parse(k, id, f, old)
				if !ok {
					rejected++
					if old != nil {
						next[k][id] = newSlot(old)
					} else {
						noGood = append(noGood, ruleRef{k, id})
					}
					continue
				}
				if old == nil {
					added++
				} else {
					updated++
				}
				next[k][id] = newSlot(r)
				if s.loaded {
					if old != nil { // as a published change would: one line per changed rule
						s.logger.Info("rule updated", zap.String("key", s.names.RuleKey(k, id)), zap.String("by", "resync"))
					}
					s.applied(k, id, old, f)
				}
			}
		}
		for id, old := range cur.of(k) {
			if _, ok := next[k][id]; ok {
				continue
			}
			if s.retained[ruleRef{k, id}] {
				next[k][id] = old
				continue
			}
			removed++
			if s.loaded {
				s.applied(k, id, old.rule.Load(), nil)
			}
		}
	}
	// Rejected here with no version of our own: serve the fleet's.
	for ref, r := range s.recoverLastGood(ctx, noGood) {
		next[ref.kind][ref.id] = newSlot(r)
	}
	s.snap.Store(&next)
	s.changes.Add(1)
	s.loaded = true
	s.status.updates.Add(int64(added + updated + removed))
	s.status.lastResync.Store(time.Now().UnixNano())
	s.status.resyncs.Add(1)
	s.feedback.skipped.end()
	total := 0
	for _, m := range next {
		total += len(m)
	}
	log := s.logger.Debug
	if reason != "periodic" || added+updated+removed+rejected > 0 {
		log = s.logger.Info
	}
	log("resynced rules from redis", zap.String("reason", reason), zap.Int("rules", total),
		zap.Int("added", added), zap.Int("updated", updated), zap.Int("removed", removed),
		zap.Int("rejected", rejected), zap.Int("retained", len(s.retained)),
		zap.Duration("took", time.Since(start)))
	s.flushFeedback(ctx)
	return nil
}

// checkEpoch detects a Redis that lost its data. The store keeps a random
// marker key in Redis; if it vanished or changed since last seen, Redis was
// restarted empty (or flushed): that is not an operator deleting rules, so
// every rule held now is retained until it is rewritten or deleted one by one.
func (s *redisSource) checkEpoch(ctx context.Context) error {
	key := s.names.Epoch()
	marker, err := s.client.Get(ctx, key).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	if marker == "" {
		var b [8]byte
		rand.Read(b[:])
		if err := s.client.SetNX(ctx, key, hex.EncodeToString(b[:]), 0).Err(); err != nil {
			return err
		}
		if marker, err = s.client.Get(ctx, key).Result(); err != nil {
			return err
		}
	}
	if s.epoch != "" && marker != s.epoch {
		held := 0
		for _, k := range Kinds() {
			for id := range byKind(*s.snap.Load(), k) {
				s.retained[ruleRef{k, id}] = true
				held++
			}
		}
		s.logger.Error("redis lost its data (epoch marker missing or changed): keeping every rule held in memory; "+
			"rewrite them to Redis to make them durable again, or DEL+PUBLISH to delete one",
			zap.String("marker", key), zap.Int("retained", held))
	}
	s.epoch = marker
	return nil
}

// scanRuleKeys lists every rule key with SCAN (never KEYS), on every master
// of a cluster.
func (s *redisSource) scanRuleKeys(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.Cmdable) error {
		for _, k := range Kinds() {
			it := c.Scan(ctx, 0, s.names.pattern(k), 1000).Iterator()
			for it.Next(ctx) {
				mu.Lock()
				seen[it.Val()] = true
				mu.Unlock()
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.client)
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	return keys, err
}

// readHashes reads rule hashes in pipelined batches, by kind and id.
func (s *redisSource) readHashes(ctx context.Context, keys []string) ([]map[string]Fields, error) {
	out := make([]map[string]Fields, numKinds())
	for k := range out {
		out[k] = map[string]Fields{}
	}
	const batch = 500
	s.feedback.skipped.begin()
	for i := 0; i < len(keys); i += batch {
		chunk := keys[i:min(i+batch, len(keys))]
		pipe := s.client.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(chunk))
		for j, key := range chunk {
			cmds[j] = pipe.HGetAll(ctx, key)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil && !isWrongType(err) {
			return out, err
		}
		for j, key := range chunk {
			if err := cmds[j].Err(); isWrongType(err) {
				s.rejectNonHash(key)
				continue
			} else if err != nil && err != redis.Nil {
				return out, err
			}
			k, id, ok := s.names.parseKey(key)
			fields := cmds[j].Val()
			if !ok || len(fields) == 0 {
				continue // deleted since the scan, or not a rule key
			}
			if err := ValidID(id); err != nil {
				s.feedback.skipped.skip(k, id, err)
				s.logger.Warn("ignoring rule key with an invalid id", zap.String("key", clip(key)))
				continue
			}
			out[k][id] = Fields(fields)
		}
	}
	return out, nil
}

// isWrongType reports Redis's answer for a key of another type: an
// operator's typo (SET rate_limit:rule:x 1), not a connection problem.
func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

func (s *redisSource) rejectNonHash(key string) {
	k, id, ok := s.names.parseKey(key)
	valid := ok && ValidID(id) == nil
	if !valid || !s.feedback.rejectedBefore(k, id, nil) {
		s.status.rejected.Add(1)
	}
	if valid {
		s.feedback.verdict(k, id, nil, errors.New("the key is not a hash"))
	}
	s.logger.Error("rule rejected: the key is not a hash; keeping the last good version", zap.String("key", clip(key)))
}
