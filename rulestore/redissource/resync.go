package redissource

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"github.com/sluicegw/sluice/rulestore"
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
	s.seedFromDisk() // first load only: what Redis lost, from the local snapshot
	// Note the change log's tail first: entries appended during the scan are
	// read again by the next poll, which is harmless.
	if err := s.streamTail(ctx); err != nil {
		return err
	}
	keys, err := s.scanRuleKeys(ctx)
	if err != nil {
		return err
	}
	s.feedback.skipped.begin() // the keys readHashes skips, for the status
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
	b := &resyncLayer{cur: s.snap.Load(), next: *rulestore.NewLayer()}
	for _, k := range rulestore.Kinds() {
		b.next[k] = make(map[string]*rulestore.Slot, len(hashes[k]))
	}
	s.take(b, hashes)
	// A failed re-read leaves the layer as the scan found it; the error
	// then ends the session, whose successor resyncs.
	reread, rereadErr := s.takeMissingRefs(ctx, b, hashes)
	s.dropUnread(b)
	// Rejected here with no version of our own: serve the fleet's.
	for ref, r := range s.recoverLastGood(ctx, b.noGood) {
		b.next[ref.Kind][ref.ID] = rulestore.NewSlot(r)
	}
	s.disk.rules = nil // the snapshot served the first load; Redis from now on
	s.snap.Store(&b.next)
	s.changes.Add(1)
	s.loaded = true
	s.status.updates.Add(int64(b.added + b.updated + b.removed))
	s.status.lastResync.Store(time.Now().UnixNano())
	s.status.resyncs.Add(1)
	s.feedback.skipped.end()
	total := 0
	for _, m := range b.next {
		total += len(m)
	}
	log := s.logger.Debug
	if reason != "periodic" || b.added+b.updated+b.removed+b.rejected > 0 {
		log = s.logger.Info
	}
	log("resynced rules from redis", zap.String("reason", reason), zap.Int("rules", total),
		zap.Int("added", b.added), zap.Int("updated", b.updated), zap.Int("removed", b.removed),
		zap.Int("rejected", b.rejected), zap.Int("retained", len(s.retained)),
		zap.Int("reread", reread), zap.Duration("took", time.Since(start)))
	if rereadErr != nil {
		return rereadErr
	}
	s.flushFeedback(ctx)
	return nil
}

// resyncLayer is the layer a resync builds from what it read, with what it
// counted for its log line.
type resyncLayer struct {
	cur                               *rulestore.Layer
	next                              rulestore.Layer
	added, updated, removed, rejected int
	noGood                            []rulestore.RuleRef // rejected with no version held here
}

// take puts the rules read from Redis in the new layer: an unchanged rule
// keeps its slot, a changed one is parsed, a bad one keeps its last good
// version.
func (s *redisSource) take(b *resyncLayer, hashes []map[string]rulestore.Fields) {
	for _, k := range rulestore.Kinds() {
		for id, f := range hashes[k] {
			old := b.cur.Get(k, id)
			delete(s.retained, rulestore.RuleRef{Kind: k, ID: id})
			switch {
			case old != nil && old.Fields.Equal(f):
				b.next[k][id] = rulestore.NewSlot(old) // same rule: handlers see no change
				s.feedback.reaccepted(k, id, f)
			default:
				r, ok := s.parse(k, id, f, old)
				if !ok {
					switch {
					case old != nil:
						b.rejected++
						b.next[k][id] = rulestore.NewSlot(old)
					case !s.feedback.isUnused(k, id):
						b.rejected++
						b.noGood = append(b.noGood, rulestore.RuleRef{Kind: k, ID: id})
					}
					continue
				}
				if old == nil {
					b.added++
				} else {
					b.updated++
				}
				b.next[k][id] = rulestore.NewSlot(r)
				if s.loaded {
					if old != nil { // as a published change would: one line per changed rule
						s.logger.Info("rule updated", zap.String("key", s.names.RuleKey(k, id)), zap.String("by", "resync"))
					}
					s.applied(k, id, old, f)
				}
			}
		}
	}
}

// dropUnread drops the rules held that the resync did not read, except
// those retained since Redis lost its data.
func (s *redisSource) dropUnread(b *resyncLayer) {
	for _, k := range rulestore.Kinds() {
		for id, old := range b.cur.Of(k) {
			if _, ok := b.next[k][id]; ok {
				continue
			}
			if s.retained[rulestore.RuleRef{Kind: k, ID: id}] {
				b.next[k][id] = old
				continue
			}
			b.removed++
			if s.loaded {
				s.applied(k, id, old.Rule.Load(), nil)
			}
		}
	}
}

// takeMissingRefs re-reads the rules that rules in the new layer name but
// the scan did not return, and takes those found. SCAN only promises the
// keys that exist for the whole scan: a writer that creates rules, then a
// binding naming them, while the scan runs can have the binding seen and a
// rule missed, and the binding would be in force without it until its
// message is taken. An id found nowhere stays missing, as before. Each
// round follows the references of the rules the last one took (a binding
// names a gray rule, which names a breaker); there are at most as many
// rounds as kinds. The epoch was checked before: a Redis that restarted
// empty since answers nothing here, and the re-read only adds rules, so the
// layer is the scan's and the next read notices the epoch. It returns how
// many ids it re-read.
func (s *redisSource) takeMissingRefs(ctx context.Context, b *resyncLayer, scanned []map[string]rulestore.Fields) (int, error) {
	asked := map[rulestore.RuleRef]bool{}
	taken, n := scanned, 0
	for range rulestore.NumKinds() {
		keys := s.missingRefs(b, taken, scanned, asked)
		if len(keys) == 0 {
			break
		}
		n += len(keys)
		hashes, err := s.readHashes(ctx, keys)
		if err != nil {
			return n, err
		}
		s.take(b, hashes)
		taken = hashes
	}
	return n, nil
}

// missingRefs lists the keys of the rules that the rules in taken name and
// that were not read yet, by the scan or an earlier round (asked). A rule
// the config declares is left out: it is in force without Redis, and an
// overlay of it written during the scan is taken with its message.
func (s *redisSource) missingRefs(b *resyncLayer, taken, scanned []map[string]rulestore.Fields, asked map[rulestore.RuleRef]bool) []string {
	var keys []string
	for _, k := range rulestore.Kinds() {
		for id := range taken[k] {
			r := b.next.Get(k, id)
			if r == nil {
				continue // rejected, with no version to name anything
			}
			refs, ok := r.Value.(rulestore.Referrer)
			if !ok {
				continue
			}
			for _, ref := range refs.Refs() {
				rr := rulestore.RuleRef{Kind: ref.Kind, ID: ref.ID}
				if _, read := rulestore.ByKind(scanned, ref.Kind)[ref.ID]; read || asked[rr] ||
					b.next.Of(ref.Kind)[ref.ID] != nil || s.staticRule(ref.Kind, ref.ID) != nil {
					continue
				}
				asked[rr] = true
				keys = append(keys, s.names.RuleKey(ref.Kind, ref.ID))
			}
		}
	}
	return keys
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
		for _, k := range rulestore.Kinds() {
			for id := range rulestore.ByKind(*s.snap.Load(), k) {
				s.retained[rulestore.RuleRef{Kind: k, ID: id}] = true
				held++
			}
		}
		s.startFence()
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
		for _, k := range rulestore.Kinds() {
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
func (s *redisSource) readHashes(ctx context.Context, keys []string) ([]map[string]rulestore.Fields, error) {
	out := make([]map[string]rulestore.Fields, rulestore.NumKinds())
	for k := range out {
		out[k] = map[string]rulestore.Fields{}
	}
	const batch = 500
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
			if err := rulestore.ValidID(id); err != nil {
				s.feedback.skipped.skip(k, id, err)
				s.logger.Warn("ignoring rule key with an invalid id", zap.String("key", clip(key)))
				continue
			}
			out[k][id] = rulestore.Fields(fields)
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
	valid := ok && rulestore.ValidID(id) == nil
	if !valid || !s.feedback.rejectedBefore(k, id, nil) {
		s.status.rejected.Add(1)
	}
	if valid {
		s.feedback.verdict(k, id, nil, errors.New("the key is not a hash"))
	}
	s.logger.Error("rule rejected: the key is not a hash; keeping the last good version", zap.String("key", clip(key)))
}
