package redissource

import (
	"context"
	"errors"
	"github.com/sluicegw/sluice/rulestore"

	"github.com/redis/go-redis/v9"
)

// maxWriteRounds bounds the optimistic retries of one write.
const maxWriteRounds = 200

// errWriteConflict: the rule kept changing under a write.
var errWriteConflict = &rulestore.Error{Class: rulestore.ErrConflict,
	Err: errors.New("the rule changed during the write several times in a row; retry")}

// Write reads a rule's raw fields, lets build decide the new ones (nil:
// delete; an error writes nothing) and writes them with their history
// entry and change-log entry, then publishes, in one transaction watched on
// the rule's key. Concurrent writers are serialised by Redis, so the hash,
// its history and its change-log entry never disagree, and no reader sees a
// publish before the data or half a rule. The change-log entry carries the
// rule's version and the publish time (published_at, unix ns) for the
// propagation-delay histogram.
//
// Redis Cluster cannot run one transaction over keys in different slots, so
// there the hash alone is replaced in the watched transaction, then the
// history and change-log entries are appended and the id published: a
// reader still never sees a publish before the data.
func (s *redisSource) Write(ctx context.Context, k rulestore.Kind, id, via, op string, _ *rulestore.Rule, build func(cur rulestore.Fields) (rulestore.Fields, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	key := s.names.RuleKey(k, id)
	_, cluster := s.client.(*redis.ClusterClient)
	txf := func(tx *redis.Tx) error {
		m, err := tx.HGetAll(ctx, key).Result()
		if err != nil && !isWrongType(err) {
			return err
		}
		var cur rulestore.Fields
		if len(m) > 0 {
			cur = rulestore.Fields(m)
		}
		f, err := build(cur)
		if err != nil {
			return err
		}
		if (f != nil && f.Equal(cur)) || (f == nil && cur == nil) {
			return nil // nothing changes: no write, history, change-log entry or publish
		}
		var args []any
		for name, v := range f {
			args = append(args, name, v)
		}
		hist := rulestore.NewHistoryEntry(k, id, s.staticRule(k, id), cur, f, via, op)
		xadd := s.changeLogAdd(changeLogEntry(k, id, f))
		tail := func(p redis.Pipeliner) {
			s.queueHistory(ctx, p, hist, false)
			p.XAdd(ctx, xadd)
			p.Publish(ctx, s.names.Channel(k), id)
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			if f != nil {
				p.HSet(ctx, key, args...)
			}
			if !cluster {
				tail(p)
			}
			return nil
		})
		if err != nil || !cluster {
			return err
		}
		_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error { tail(p); return nil })
		return err
	}
	// Optimistic: another writer's commit between the read and ours
	// restarts the read. Each round lets one writer through, so this ends.
	for range maxWriteRounds {
		err := s.client.Watch(ctx, txf, key)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return errWriteConflict
}

// ApplySet reads the raw fields of every ref, watched, lets decide choose
// the writes, and writes them all in one MULTI/EXEC with their history,
// change-log entries and publishes; a change to any watched key before the
// EXEC restarts the read, so the verdicts always describe what is
// overwritten.
func (s *redisSource) ApplySet(ctx context.Context, refs map[rulestore.RuleRef]bool, _ func(rulestore.Kind, string) *rulestore.Rule, decide func(map[rulestore.RuleRef]rulestore.Fields) ([]rulestore.ApplyObject, error)) error {
	if _, cluster := s.client.(*redis.ClusterClient); cluster {
		return rulestore.Errorf(rulestore.ErrUnsupported, "an atomic apply needs one Redis transaction over keys in many "+
			"hash slots, which Redis Cluster cannot run: write the rules one by one (PUT /sluice/rules/{kind}/{id})")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*s.timeout)
	defer cancel()
	list := make([]rulestore.RuleRef, 0, len(refs))
	keys := make([]string, 0, len(refs))
	for ref := range refs {
		list = append(list, ref)
		keys = append(keys, s.names.RuleKey(ref.Kind, ref.ID))
	}
	txf := func(tx *redis.Tx) error {
		cmds := make([]*redis.MapStringStringCmd, len(list))
		_, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range list {
				cmds[i] = p.HGetAll(ctx, keys[i])
			}
			return nil
		})
		held := make(map[rulestore.RuleRef]rulestore.Fields, len(list))
		for i, c := range cmds {
			m, cerr := c.Result()
			if cerr != nil && !isWrongType(cerr) {
				return cerr
			}
			if len(m) > 0 {
				held[list[i]] = rulestore.Fields(m)
			}
		}
		if err != nil && !isWrongType(err) {
			return err
		}
		objs, err := decide(held)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, o := range objs {
				if o.Result == rulestore.ApplyUnchanged {
					continue
				}
				key := s.names.RuleKey(o.Ref().Kind, o.ID)
				p.Del(ctx, key)
				if o.Next() != nil {
					args := make([]any, 0, 2*len(o.Next()))
					for name, v := range o.Next() {
						args = append(args, name, v)
					}
					p.HSet(ctx, key, args...)
				}
				s.queueHistory(ctx, p, rulestore.NewHistoryEntry(o.Ref().Kind, o.ID, s.staticRule(o.Ref().Kind, o.ID), o.Prev(), o.Next(), "apply", ""), false)
				p.XAdd(ctx, s.changeLogAdd(changeLogEntry(o.Ref().Kind, o.ID, o.Next())))
				p.Publish(ctx, s.names.Channel(o.Ref().Kind), o.ID)
			}
			return nil
		})
		return err
	}
	for range maxWriteRounds {
		err := s.client.Watch(ctx, txf, keys...)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return errWriteConflict
}
