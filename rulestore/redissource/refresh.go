package redissource

import (
	"context"
	"github.com/sluicegw/sluice/rulestore"
	"time"

	"github.com/redis/go-redis/v9"
)

// Refreshing rules named on the rule channels. Anyone who can PUBLISH can
// name any id, so the cost of a message must not grow with the junk in
// front of it: ids are collected while messages are waiting (duplicates
// collapse), then re-read in one pipelined round trip per refreshBatch ids.
// An id found absent is remembered for absentTTL: a message naming it again
// within that time does not re-read it at once but defers it to when the
// entry expires. A real creation of such an id (HSET, then PUBLISH) is thus
// applied at most absentTTL late, never lost; ids nobody junked before are
// not delayed at all. Ids declared in the config are never remembered
// absent: a DEL restores their static rule, and a kill switch written
// right after that must not wait out the cache.
const (
	refreshBatch   = 500                    // ids per pipelined round trip
	drainLimit     = 20_000                 // messages taken before re-reading
	absentTTL      = 200 * time.Millisecond // how long an absent id is remembered
	absentMax      = 100_000                // bound on remembered absent ids
	absentSweepMin = 1024                   // entries before expired ones are swept
)

// refreshQueue is owned by the run goroutine.
type refreshQueue struct {
	ttl      time.Duration                   // how long an absent id is remembered
	pending  map[rulestore.RuleRef]struct{}  // to re-read in the next batch
	deferred map[rulestore.RuleRef]struct{}  // named again while remembered absent
	absent   map[rulestore.RuleRef]time.Time // found absent: remembered until
	swept    int                             // len(absent) after the last sweep
}

func newRefreshQueue() refreshQueue {
	return refreshQueue{ttl: absentTTL, pending: map[rulestore.RuleRef]struct{}{}, deferred: map[rulestore.RuleRef]struct{}{}, absent: map[rulestore.RuleRef]time.Time{}}
}

// add queues a published id. now is the time the message was taken.
func (q *refreshQueue) add(ref rulestore.RuleRef, now time.Time) {
	if until, ok := q.absent[ref]; ok && now.Before(until) {
		q.deferred[ref] = struct{}{}
		return
	}
	q.pending[ref] = struct{}{}
}

// due moves deferred ids whose absent entry expired to pending, and forgets
// expired entries once the map has doubled since the last sweep (at least
// absentSweepMin entries): ids deleted for good leave the map soon after,
// at an amortised constant cost per id.
func (q *refreshQueue) due(now time.Time) {
	for ref := range q.deferred {
		if !now.Before(q.absent[ref]) {
			delete(q.deferred, ref)
			q.pending[ref] = struct{}{}
		}
	}
	if len(q.absent) > max(absentSweepMin, 2*q.swept) {
		for ref, until := range q.absent {
			if !now.Before(until) {
				delete(q.absent, ref)
			}
		}
		q.swept = len(q.absent)
	}
}

// found records the result of a re-read; present is true for a hash found
// and for an id the config declares (whose absence is never junk).
func (q *refreshQueue) found(ref rulestore.RuleRef, present bool, now time.Time) {
	if present {
		delete(q.absent, ref)
		return
	}
	if len(q.absent) >= absentMax {
		return // full of junk: re-read, as without the cache
	}
	q.absent[ref] = now.Add(q.ttl)
}

// drop forgets every queued id: a full resync reads them all anyway.
func (q *refreshQueue) drop() {
	clear(q.pending)
	clear(q.deferred)
}

// take returns the pending ids and empties the set.
func (q *refreshQueue) take() []rulestore.RuleRef {
	if len(q.pending) == 0 {
		return nil
	}
	refs := make([]rulestore.RuleRef, 0, len(q.pending))
	for ref := range q.pending {
		refs = append(refs, ref)
	}
	clear(q.pending)
	return refs
}

// flushPending re-reads every pending id.
func (s *redisSource) flushPending(ctx context.Context) error {
	return s.refreshAll(ctx, s.queue.take())
}

// refreshAll re-reads rules in pipelined batches: present means upsert,
// absent means delete.
func (s *redisSource) refreshAll(ctx context.Context, refs []rulestore.RuleRef) error {
	defer s.publishEdit() // also when a read fails half way
	for i := 0; i < len(refs); i += refreshBatch {
		chunk := refs[i:min(i+refreshBatch, len(refs))]
		pipe := s.client.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(chunk))
		for j, ref := range chunk {
			cmds[j] = pipe.HGetAll(ctx, s.names.RuleKey(ref.Kind, ref.ID))
		}
		// The epoch marker rides in the same round trip: go-redis redials a
		// pooled connection on its own, so this read may reach a Redis that
		// restarted empty before the subscription noticed. Its absent
		// hashes are lost data, not deletes: resync, which retains them.
		marker := pipe.Get(ctx, s.names.Epoch())
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil && !isWrongType(err) {
			return err
		}
		if m, err := marker.Result(); (err == nil || err == redis.Nil) && m != s.epoch {
			s.publishEdit()
			return s.fullResync(ctx, "epoch changed")
		} else if err != nil && err != redis.Nil {
			return err
		}
		now := time.Now()
		if len(s.refreshed) > 10000 {
			clear(s.refreshed) // bounded; only recent refreshes matter
		}
		for j, ref := range chunk {
			fields, err := cmds[j].Result()
			if isWrongType(err) {
				s.rejectNonHash(s.names.RuleKey(ref.Kind, ref.ID))
				continue
			}
			if err != nil {
				return err
			}
			s.refreshed[ref] = now.UnixNano()
			s.queue.found(ref, len(fields) > 0 || s.staticRule(ref.Kind, ref.ID) != nil, now)
			if len(fields) == 0 {
				if !s.keepLost(ref) {
					s.remove(ref.Kind, ref.ID)
				}
				continue
			}
			s.upsert(ref.Kind, ref.ID, rulestore.Fields(fields))
		}
	}
	// One publish (one copy of each edited kind's map) for the whole
	// batch: a copy per chunk would cost O(rules held) per refreshBatch ids.
	s.publishEdit()
	s.installLastGood(ctx)
	// The verdicts and history of what was applied (feedback.go) are written
	// by the session once no change is waiting, so a bulk change is in
	// force before its feedback is written.
	return nil
}
